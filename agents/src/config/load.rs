//! Loading the layered configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;

use indexmap::IndexMap;
use serde_json::Value;

use super::layers::{self, Layer, Origin};
use super::{Config, ConfigError, Paths, ProviderKind};
use super::{check, env};

/// What to load: the directory, the extra config file, the data dir override, the environment.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The directory taskforce runs in; project files are found from here up to the git root.
    pub cwd: PathBuf,
    /// `--config FILE`: read after the project files; wins over `TASKFORCE_CONFIG`.
    pub config_file: Option<PathBuf>,
    /// `--data-dir DIR`: wins over every other setting of the data directory.
    pub data_dir: Option<PathBuf>,
    /// The environment (`HOME`, `XDG_*`, `TASKFORCE_*`); passed in so tests stay hermetic.
    pub env: BTreeMap<String, String>,
}

impl LoadOptions {
    /// Options for this process: its working directory and its environment.
    pub fn from_process(
        config_file: Option<PathBuf>,
        data_dir: Option<PathBuf>,
    ) -> Result<Self, ConfigError> {
        Ok(LoadOptions {
            cwd: std::env::current_dir().map_err(ConfigError::Cwd)?,
            config_file,
            data_dir,
            env: std::env::vars().collect(),
        })
    }
}

/// A loaded configuration with the directories it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The merged, validated configuration.
    pub config: Config,
    /// The directories used, the data directory resolved.
    pub paths: Paths,
    /// The files that were read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// The config files looked for, lowest precedence first (see [`Paths::config_files`]),
    /// then the `--config` (or `TASKFORCE_CONFIG`) file; those that exist were read.
    pub config_files: Vec<PathBuf>,
    /// Things that loaded but not as written (for example an undefined model alias).
    pub warnings: Vec<String>,
}

/// Loads and validates the configuration for `options`.
pub fn load(options: &LoadOptions) -> Result<LoadedConfig, ConfigError> {
    let mut paths = Paths::discover(&options.cwd, &options.env);
    let explicit = explicit_file(options, &paths)?;
    let mut config_files = paths.config_files();
    config_files.extend(explicit.clone());

    let mut files = layers::file_layers(&paths);
    files.extend(explicit.as_deref().map(Layer::file));
    let (env, mut warnings) = env::env_layer(&options.env, &paths);
    // What each layer holds, to check the models it names once the providers are known.
    let mut held = Vec::new();
    for layer in files.iter().chain(env.iter()) {
        held.push((layer.origin.clone(), layer.check(&paths)?));
    }

    // Claude Code agent files name models by alias; resolve them with the files' aliases.
    let aliases = merged(files.iter().chain(env.iter()), &paths)?.model_aliases;
    let markdown = layers::markdown_layers(&paths, &aliases, &mut warnings)?;
    for layer in &markdown {
        held.push((layer.origin.clone(), layer.check(&paths)?));
    }

    // Precedence: global file < global markdown < project files and markdown, folder by folder
    // from the git root down < --config file < environment.
    let ordered = order(files, markdown, explicit.as_deref(), &paths);
    let sources = ordered
        .iter()
        .filter_map(|l| match &l.origin {
            Origin::File(p) | Origin::Agent(p) | Origin::Command(p) => Some(p.clone()),
            Origin::Env => None,
        })
        .collect();
    let config = merged(ordered.iter().chain(env.iter()), &paths)?;
    validate(&config)?;
    let providers = config.available_providers();
    for (origin, value) in &held {
        check::models_have_providers(value, origin, &paths, &providers)?;
    }
    paths.data_dir = options
        .data_dir
        .as_ref()
        .or(config.data_dir.as_ref())
        .map(|d| paths.resolve(d))
        .unwrap_or_else(|| paths.data_dir.clone());
    Ok(LoadedConfig {
        config,
        paths,
        sources,
        config_files,
        warnings,
    })
}

/// The `--config` file, else `TASKFORCE_CONFIG`; it must exist.
fn explicit_file(options: &LoadOptions, paths: &Paths) -> Result<Option<PathBuf>, ConfigError> {
    let (path, named_by) = match (&options.config_file, options.env.get("TASKFORCE_CONFIG")) {
        (Some(p), _) => (p.clone(), "--config"),
        (None, Some(p)) if !p.is_empty() => (PathBuf::from(p), "TASKFORCE_CONFIG"),
        _ => return Ok(None),
    };
    let path = paths.resolve(&path);
    if !path.is_file() {
        return Err(ConfigError::MissingFile { path, named_by });
    }
    Ok(Some(path))
}

/// Interleaves file and markdown layers by level: global first, then each project folder.
fn order(
    files: Vec<Layer>,
    markdown: Vec<Layer>,
    explicit: Option<&std::path::Path>,
    paths: &Paths,
) -> Vec<Layer> {
    // The level of a path: 0 for global, 1 + folder index for project folders (deepest match).
    let level = |p: &std::path::Path| -> usize {
        paths
            .project_dirs
            .iter()
            .enumerate()
            .filter(|(_, d)| {
                p.parent() == Some(d.as_path())
                    || [".taskforce", ".opencode", ".claude"]
                        .iter()
                        .any(|sub| p.starts_with(d.join(sub)))
            })
            .map(|(i, _)| i + 1)
            .max()
            .unwrap_or(0)
    };
    let mut keyed: Vec<(usize, usize, Layer)> = Vec::new();
    let mut explicit_layer = None;
    for layer in files {
        match &layer.origin {
            Origin::File(p) if Some(p.as_path()) == explicit => explicit_layer = Some(layer),
            Origin::File(p) => keyed.push((level(p), 0, layer)),
            _ => keyed.push((0, 0, layer)),
        }
    }
    for layer in markdown {
        let l = match &layer.origin {
            Origin::Agent(p) | Origin::Command(p) => level(p),
            _ => 0,
        };
        keyed.push((l, 1, layer));
    }
    // A stable sort keeps the discovery order inside each (level, files-before-markdown) group.
    keyed.sort_by_key(|(l, m, _)| (*l, *m));
    let mut out: Vec<Layer> = keyed.into_iter().map(|(_, _, l)| l).collect();
    out.extend(explicit_layer);
    out
}

/// Merges layers in order with the `config` crate and deserializes the result.
fn merged<'a>(
    layers: impl Iterator<Item = &'a Layer>,
    paths: &Paths,
) -> Result<Config, ConfigError> {
    let mut builder = config::Config::builder();
    for layer in layers {
        builder = builder.add_source(vec![layer.source.clone_into_box()]);
    }
    let origin = Origin::File(PathBuf::from("(merged configuration)"));
    let value: Value = builder
        .build()
        .and_then(|c| c.try_deserialize())
        .map_err(|e| layers::syntax_error(&origin, paths, e))?;
    layers::deserialize(value, &origin, paths)
}

/// Checks that need the whole configuration.
fn validate(config: &Config) -> Result<(), ConfigError> {
    let invalid = |key: String, message: String| ConfigError::Invalid {
        origin: "configuration".into(),
        key,
        message,
    };
    for (id, provider) in &config.provider {
        if provider.kind.is_none() && ProviderKind::from_provider_id(id).is_none() {
            return Err(invalid(
                format!("provider.{id}.type"),
                format!(
                    "missing; expected one of {}",
                    ProviderKind::NAMES.map(|n| format!("`{n}`")).join(", ")
                ),
            ));
        }
    }
    for (key, n) in [
        ("subagent.max_concurrent", config.subagent.max_concurrent),
        ("subagent.max_total", config.subagent.max_total),
        ("subagent.max_per_session", config.subagent.max_per_session),
    ] {
        if n == 0 {
            return Err(invalid(key.into(), "must be at least 1".into()));
        }
    }
    for (key, d) in [
        ("subagent.timeout", config.subagent.timeout),
        ("subagent.idle_timeout", config.subagent.idle_timeout),
    ] {
        if d.is_zero() {
            return Err(invalid(key.into(), "must be longer than zero".into()));
        }
    }
    check_aliases(&config.model_aliases).map_err(|(k, m)| invalid(k, m))?;
    config.search.validate().map_err(|(k, m)| invalid(k, m))?;
    config.cluster.validate().map_err(|(k, m)| invalid(k, m))?;
    config.store.validate().map_err(|(k, m)| invalid(k, m))?;
    for (name, keys) in &config.keybinds {
        if !super::keybinds::is_action(name) {
            let suggestion = super::keys::closest(name, super::keybinds::actions());
            let hint = match suggestion {
                Some(s) => format!("did you mean \"{s}\"?"),
                None => "see OpenCode's keybind names".to_string(),
            };
            return Err(invalid(
                format!("keybinds.{name}"),
                format!("no such action; {hint}"),
            ));
        }
        if keys.trim().is_empty() {
            return Err(invalid(
                format!("keybinds.{name}"),
                "must name a key, or \"none\" to unbind".into(),
            ));
        }
    }
    for (name, server) in &config.mcp {
        server.check(name)?;
    }
    if config.experimental.mcp_timeout == Some(0) {
        return Err(invalid(
            "experimental.mcp_timeout".into(),
            "must be at least 1 (milliseconds)".into(),
        ));
    }
    for (name, command) in &config.command {
        if command.template.trim().is_empty() {
            return Err(invalid(
                format!("command.{name}.template"),
                "must not be empty".into(),
            ));
        }
    }
    Ok(())
}

fn check_aliases(aliases: &IndexMap<String, String>) -> Result<(), (String, String)> {
    for (alias, target) in aliases {
        target
            .parse::<crate::model::ModelRef>()
            .map_err(|e| (format!("model_aliases.{alias}"), e.to_string()))?;
    }
    Ok(())
}
