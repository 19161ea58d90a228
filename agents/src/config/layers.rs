//! The layers of configuration, lowest precedence first, and how each is read and checked.

use std::path::{Path, PathBuf};

use config::{Environment, File, FileFormat, Source};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use super::error::UnknownKey;
use super::{Config, ConfigError, Paths};
use super::{check, keys};
use crate::agent::{CLAUDE_KEYS, ClaudeError, from_claude};
use crate::markdown;

/// Where a layer comes from, for error messages.
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    /// A TOML or JSON config file.
    File(PathBuf),
    /// An agent markdown file; its keys live under `agent.<name>`.
    Agent(PathBuf),
    /// A command markdown file; its keys live under `command.<name>`.
    Command(PathBuf),
    /// The `TASKFORCE_*` environment variables.
    Env,
}

/// One source of configuration.
pub(crate) struct Layer {
    pub origin: Origin,
    pub source: Box<dyn Source + Send + Sync>,
}

impl Layer {
    /// A TOML or JSON file layer (by extension; anything else is read as TOML).
    pub fn file(path: &Path) -> Layer {
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => FileFormat::Json,
            _ => FileFormat::Toml,
        };
        Layer {
            origin: Origin::File(path.to_path_buf()),
            source: Box::new(File::from(path).format(format).required(true)),
        }
    }

    /// A layer of `TASKFORCE_*` variables (`TASKFORCE_<KEY>`, `__` nesting); `None` when empty.
    pub fn env(vars: config::Map<String, String>) -> Option<Layer> {
        if vars.is_empty() {
            return None;
        }
        Some(Layer {
            origin: Origin::Env,
            source: Box::new(
                Environment::with_prefix("TASKFORCE")
                    .prefix_separator("_")
                    .separator("__")
                    .try_parsing(true)
                    .source(Some(vars)),
            ),
        })
    }

    /// A layer holding one markdown-defined agent or command, already in config shape.
    fn markdown(origin: Origin, value: Value) -> Layer {
        Layer {
            origin,
            source: Box::new(File::from_str(&value.to_string(), FileFormat::Json)),
        }
    }

    /// Reads this layer alone and checks it against the schema; returns what it holds.
    pub fn check(&self, paths: &Paths) -> Result<Value, ConfigError> {
        let value = self.read(paths)?;
        deserialize(value.clone(), &self.origin, paths)?;
        Ok(value)
    }

    /// Reads this layer alone into JSON.
    fn read(&self, paths: &Paths) -> Result<Value, ConfigError> {
        config::Config::builder()
            .add_source(vec![self.source.clone_into_box()])
            .build()
            .and_then(|c| c.try_deserialize::<Value>())
            .map_err(|e| syntax_error(&self.origin, paths, e))
    }
}

/// Turns a `config` crate error into ours, naming the layer.
pub(crate) fn syntax_error(origin: &Origin, paths: &Paths, e: config::ConfigError) -> ConfigError {
    let message = match e {
        config::ConfigError::FileParse { cause, .. } => cause.to_string(),
        config::ConfigError::Foreign(cause) => cause.to_string(),
        other => other.to_string(),
    };
    ConfigError::Syntax {
        origin: describe(origin, paths),
        message: message.trim().to_string(),
    }
}

/// Deserializes a layer's (or the merged) JSON, naming origin and key path on failure.
pub(crate) fn deserialize(
    value: Value,
    origin: &Origin,
    paths: &Paths,
) -> Result<Config, ConfigError> {
    serde_path_to_error::deserialize::<_, Config>(value).map_err(|e| {
        let segments: Vec<String> = e.path().iter().map(|s| s.to_string()).collect();
        let message = e.inner().to_string();
        if let Some(unknown) = check::unknown_key(origin, paths, &segments, &message) {
            return unknown;
        }
        let (origin_text, key) = match origin {
            // The file is the agent or command: name the frontmatter key alone.
            Origin::Agent(_) | Origin::Command(_) if segments.len() > 2 => {
                (describe(origin, paths), segments[2..].join("."))
            }
            Origin::Env => (
                format!("environment variable {}", env_var(&segments)),
                segments.join("."),
            ),
            _ => (describe(origin, paths), segments.join(".")),
        };
        ConfigError::Invalid {
            origin: origin_text,
            key: if key.is_empty() { ".".into() } else { key },
            message,
        }
    })
}

/// The environment variable that sets the key at `segments` (`TASKFORCE_SUBAGENT__TIMEOUT`).
pub(crate) fn env_var(segments: &[String]) -> String {
    let upper: Vec<String> = segments.iter().map(|s| s.to_ascii_uppercase()).collect();
    format!("TASKFORCE_{}", upper.join("__"))
}

/// The origin as shown to the user.
pub(crate) fn describe(origin: &Origin, paths: &Paths) -> String {
    match origin {
        Origin::File(p) | Origin::Agent(p) | Origin::Command(p) => paths.display(p),
        Origin::Env => "environment (TASKFORCE_*)".into(),
    }
}

/// The config files of every level, lowest precedence first, that exist.
pub(crate) fn file_layers(paths: &Paths) -> Vec<Layer> {
    paths
        .config_files()
        .iter()
        .filter(|f| f.is_file())
        .map(|f| Layer::file(f))
        .collect()
}

/// The format of a folder of markdown definitions.
#[derive(Clone, Copy)]
enum Kind {
    /// taskforce/OpenCode agent files.
    Agent,
    /// Agent files whose mode is forced to `primary` (legacy `mode/` folders).
    Mode,
    /// Claude Code agent files.
    Claude,
    /// Command files.
    Command,
}

/// The markdown folders of the global and project levels, lowest precedence first.
fn markdown_dirs(paths: &Paths) -> Vec<(PathBuf, Kind)> {
    let mut dirs = Vec::new();
    let family = |dirs: &mut Vec<(PathBuf, Kind)>, base: PathBuf| {
        for (sub, kind) in [
            ("agent", Kind::Agent),
            ("agents", Kind::Agent),
            ("mode", Kind::Mode),
            ("modes", Kind::Mode),
            ("command", Kind::Command),
            ("commands", Kind::Command),
        ] {
            dirs.push((base.join(sub), kind));
        }
    };
    if let Some(x) = &paths.xdg_config {
        family(&mut dirs, x.join("opencode"));
    }
    if let Some(home) = &paths.home {
        dirs.push((home.join(".claude/agents"), Kind::Claude));
    }
    if let Some(g) = &paths.global_config_dir {
        family(&mut dirs, g.clone());
    }
    for dir in &paths.project_dirs {
        dirs.push((dir.join(".claude/agents"), Kind::Claude));
        family(&mut dirs, dir.join(".opencode"));
        family(&mut dirs, dir.join(".taskforce"));
    }
    dirs
}

/// One layer per markdown agent or command file; warnings for things that were not mapped.
pub(crate) fn markdown_layers(
    paths: &Paths,
    aliases: &IndexMap<String, String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Layer>, ConfigError> {
    let mut out = Vec::new();
    for (dir, kind) in markdown_dirs(paths) {
        let recursive = !matches!(kind, Kind::Claude | Kind::Mode);
        for file in markdown_files(&dir, recursive) {
            let front = markdown::read(&file)
                .map_err(|e| e.shown_as(PathBuf::from(paths.display(&file))))?;
            let name = relative_name(&dir, &file);
            let layer = match kind {
                Kind::Agent | Kind::Mode => {
                    let mut map = front.data;
                    if !front.body.is_empty() {
                        map.insert("prompt".into(), json!(front.body));
                    }
                    if matches!(kind, Kind::Mode) {
                        map.insert("mode".into(), json!("primary"));
                    }
                    Layer::markdown(Origin::Agent(file), json!({"agent": {name: map}}))
                }
                Kind::Claude => {
                    let agent = from_claude(&front, &name, aliases)
                        .map_err(|e| claude_error(e, paths.display(&file)))?;
                    warnings.extend(
                        agent
                            .warnings
                            .iter()
                            .map(|w| format!("{}: {w}", paths.display(&file))),
                    );
                    Layer::markdown(
                        Origin::Agent(file),
                        json!({"agent": {agent.name: agent.config}}),
                    )
                }
                Kind::Command => {
                    let mut map: Map<String, Value> = front.data;
                    map.insert("template".into(), json!(front.body));
                    Layer::markdown(Origin::Command(file), json!({"command": {name: map}}))
                }
            };
            out.push(layer);
        }
    }
    Ok(out)
}

/// A Claude Code agent file's error, naming the file (`origin`).
fn claude_error(error: ClaudeError, origin: String) -> ConfigError {
    match error {
        ClaudeError::UnknownKey(key) => ConfigError::UnknownKey(Box::new(UnknownKey {
            origin,
            section: "the frontmatter".into(),
            suggestion: keys::closest(&key, CLAUDE_KEYS.iter().copied()).map(str::to_string),
            valid: CLAUDE_KEYS.iter().map(|k| k.to_string()).collect(),
            key,
        })),
        ClaudeError::Invalid { key, message } => ConfigError::Invalid {
            origin,
            key,
            message,
        },
    }
}

/// `.md` files below `dir` (only directly in it unless `recursive`), sorted by path.
fn markdown_files(dir: &Path, recursive: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if recursive {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `review/security` for `<dir>/review/security.md`.
fn relative_name(dir: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(dir).unwrap_or(file).with_extension("");
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
