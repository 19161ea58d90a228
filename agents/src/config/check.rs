//! Checks of what a layer says that name the place it says it: keys its section does not have,
//! and models whose provider the configuration does not have.

use serde_json::Value;

use super::ConfigError;
use super::error::{UnconfiguredProvider, UnknownKey};
use super::keys;
use super::layers::{Origin, describe, env_var};
use super::paths::Paths;

/// The error for serde's "unknown field" `message` at key path `segments` (ending in the
/// unknown key) of a layer from `origin`; `None` when the message is about something else.
pub(crate) fn unknown_key(
    origin: &Origin,
    paths: &Paths,
    segments: &[String],
    message: &str,
) -> Option<ConfigError> {
    let (key, valid) = keys::unknown_field(message)?;
    let parents = segments
        .get(..segments.len().saturating_sub(1))
        .unwrap_or(&[]);
    let section = match origin {
        // The file is one agent or command: its keys sit under `agent.<name>` of the layer.
        Origin::Agent(_) | Origin::Command(_) if parents.len() <= 2 => "the frontmatter".into(),
        Origin::Agent(_) | Origin::Command(_) => format!("`{}`", parents[2..].join(".")),
        _ if parents.is_empty() => "the top level".into(),
        _ => format!("[{}]", parents.join(".")),
    };
    let suggestion = keys::closest(&key, valid.iter().map(String::as_str)).map(str::to_string);
    Some(ConfigError::UnknownKey(Box::new(UnknownKey {
        origin: describe(origin, paths),
        section,
        key,
        suggestion,
        valid,
    })))
}

/// Checks that every model a layer names (`model`, `small_model`, `agent.*.model`,
/// `command.*.model`) has its provider among `providers`.
pub(crate) fn models_have_providers(
    value: &Value,
    origin: &Origin,
    paths: &Paths,
    providers: &[String],
) -> Result<(), ConfigError> {
    let mut named: Vec<(Vec<String>, &str)> = Vec::new();
    for key in ["model", "small_model"] {
        if let Some(model) = value.get(key).and_then(Value::as_str) {
            named.push((vec![key.to_string()], model));
        }
    }
    for section in ["agent", "command"] {
        let Some(entries) = value.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (name, entry) in entries {
            if let Some(model) = entry.get("model").and_then(Value::as_str) {
                named.push((vec![section.into(), name.clone(), "model".into()], model));
            }
        }
    }
    for (path, model) in named {
        let Some((provider, _)) = model.split_once('/') else {
            continue;
        };
        if providers.iter().any(|p| p == provider) {
            continue;
        }
        let key = match origin {
            Origin::Agent(_) | Origin::Command(_) if path.len() > 2 => path[2..].join("."),
            _ => path.join("."),
        };
        let origin_text = match origin {
            Origin::Env => format!("environment variable {}", env_var(&path)),
            _ => describe(origin, paths),
        };
        return Err(ConfigError::UnconfiguredProvider(Box::new(
            UnconfiguredProvider {
                origin: origin_text,
                key,
                model: model.to_string(),
                provider: provider.to_string(),
                known: providers.to_vec(),
            },
        )));
    }
    Ok(())
}
