//! A project's `taskforce.toml` (or `.json` when the input starts with `{`), loaded as the CLI
//! loads it.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use taskforce_agents::config::{LoadOptions, load};

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let project = dir.path().join("project");
    if std::fs::create_dir_all(project.join(".git")).is_err() {
        return;
    }
    let name = if data.first() == Some(&b'{') {
        "taskforce.json"
    } else {
        "taskforce.toml"
    };
    if std::fs::write(project.join(name), data).is_err() {
        return;
    }
    let mut env = BTreeMap::new();
    env.insert("HOME".to_string(), dir.path().display().to_string());
    let _ = load(&LoadOptions {
        cwd: project,
        config_file: None,
        data_dir: Some(dir.path().join("data")),
        env,
    });
});
