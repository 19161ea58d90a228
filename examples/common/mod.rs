//! Shared set-up of the examples: a throwaway project whose model is the offline scripted one.

use std::collections::BTreeMap;

use taskforce::{LoadOptions, RuntimeOptions, load_config};

/// Options for a runtime over a fresh project in a temporary folder, playing `script`
/// (`echo` answers with the prompt's text; `demo` is `taskforce demo`'s script).
pub fn offline_options(script: &str) -> anyhow::Result<(tempfile::TempDir, RuntimeOptions)> {
    let dir = tempfile::tempdir()?;
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project)?;
    std::fs::write(
        project.join("taskforce.toml"),
        format!(
            "model = \"scripted/example\"\n[provider.scripted]\ntype = \"scripted\"\nscript = \"{script}\"\n"
        ),
    )?;
    let mut env = BTreeMap::new();
    env.insert(
        "HOME".to_string(),
        dir.path().join("home").display().to_string(),
    );
    let loaded = load_config(&LoadOptions {
        cwd: project,
        config_file: None,
        data_dir: Some(dir.path().join("data")),
        env: env.clone(),
    })?;
    let mut options = RuntimeOptions::new(loaded);
    options.env = env;
    Ok((dir, options))
}
