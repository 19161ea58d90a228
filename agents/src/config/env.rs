//! The `TASKFORCE_*` environment variables: those that set configuration keys make a layer;
//! those that match no key are left out with a warning naming them (a misspelt variable would
//! otherwise be silently ignored).

use std::collections::BTreeMap;

use super::layers::{Layer, env_var};
use super::{Config, ConfigError, Paths, keys};

/// Variables taskforce reads for itself that are not configuration keys.
const NOT_CONFIG: &[&str] = &["TASKFORCE_CONFIG", "TASKFORCE_SERVER_PASSWORD"];

/// The layer of `env`'s `TASKFORCE_*` variables that name configuration keys, and a warning for
/// each one that names none. A variable naming a key with a bad value stays in the layer, whose
/// check then fails naming it.
pub(crate) fn env_layer(
    env: &BTreeMap<String, String>,
    paths: &Paths,
) -> (Option<Layer>, Vec<String>) {
    let top_keys = keys::fields_of::<Config>();
    let mut vars = config::Map::new();
    let mut warnings = Vec::new();
    for (name, value) in env {
        let Some(rest) = name.strip_prefix("TASKFORCE_") else {
            continue;
        };
        if NOT_CONFIG.contains(&name.as_str()) {
            continue;
        }
        let top = rest
            .split("__")
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !top_keys.contains(&top) {
            let hint = keys::closest(&top, top_keys.iter().map(String::as_str))
                .map(|k| format!("; did you mean {}?", env_var(&[k.to_string()])))
                .unwrap_or_default();
            warnings.push(format!(
                "environment variable {name} matches no configuration key and is ignored{hint}"
            ));
            continue;
        }
        let alone = config::Map::from_iter([(name.clone(), value.clone())]);
        if let Some(Err(ConfigError::UnknownKey(unknown))) =
            Layer::env(alone).map(|layer| layer.check(paths))
        {
            warnings.push(format!(
                "environment variable {name} matches no configuration key and is ignored (unknown key \"{}\" in {}; {})",
                unknown.key,
                unknown.section,
                keys::hint(unknown.suggestion.as_deref(), &unknown.valid)
            ));
            continue;
        }
        vars.insert(name.clone(), value.clone());
    }
    (Layer::env(vars), warnings)
}
