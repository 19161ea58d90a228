//! Which keys a section of configuration has, and the closest one to a key it does not have.
//!
//! The valid keys come from the types themselves: serde's "unknown field" error lists every
//! field a struct accepts, so a field added to a struct later is known here without an edit.

use serde::de::DeserializeOwned;

/// How alike (0 to 1, case ignored) a key must be to a valid one to be offered as a fix.
const CLOSE_ENOUGH: f64 = 0.6;

/// The unknown key and the keys the struct accepts, read from a serde "unknown field" message
/// (`` unknown field `x`, expected one of `a`, `b` ``); `None` for any other message.
pub(crate) fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, expected) = rest.split_once('`')?;
    let valid = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((key.to_string(), valid))
}

/// The keys a `T` accepts (its fields as written in config), read from serde's own error for
/// a key no struct has.
pub(crate) fn fields_of<T: DeserializeOwned>() -> Vec<String> {
    let probe = serde_json::json!({ "\u{1}": null });
    match serde_json::from_value::<T>(probe) {
        Ok(_) => Vec::new(),
        Err(e) => unknown_field(&e.to_string())
            .map(|(_, valid)| valid)
            .unwrap_or_default(),
    }
}

/// The valid key most like `key`, when it is alike enough to be a likely slip of the keyboard.
pub(crate) fn closest<'a>(key: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let key = key.to_lowercase();
    valid
        .into_iter()
        .map(|candidate| {
            let score = strsim::normalized_damerau_levenshtein(&key, &candidate.to_lowercase());
            (score, candidate)
        })
        .filter(|(score, _)| *score >= CLOSE_ENOUGH)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// What to tell the user after an unknown key: the closest valid key, else the valid ones.
pub(crate) fn hint(suggestion: Option<&str>, valid: &[String]) -> String {
    match suggestion {
        Some(s) => format!("did you mean \"{s}\"?"),
        None if valid.is_empty() => "this section takes no keys".into(),
        None => format!("valid keys: {}", valid.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, SubagentConfig};

    #[test]
    fn serde_messages_give_the_key_and_the_valid_ones() {
        let (key, valid) =
            unknown_field("unknown field `modle`, expected one of `model`, `small_model`").unwrap();
        assert_eq!(key, "modle");
        assert_eq!(valid, ["model", "small_model"]);
        let (_, valid) = unknown_field("unknown field `x`, expected `a` or `b`").unwrap();
        assert_eq!(valid, ["a", "b"]);
        let (_, valid) = unknown_field("unknown field `x`, there are no fields").unwrap();
        assert!(valid.is_empty());
        assert_eq!(unknown_field("invalid type: string, expected u32"), None);
    }

    #[test]
    fn the_valid_keys_come_from_the_types() {
        let subagent = fields_of::<SubagentConfig>();
        assert!(subagent.contains(&"max_concurrent".to_string()));
        assert!(subagent.contains(&"idle_timeout".to_string()));
        let top = fields_of::<Config>();
        assert!(top.contains(&"server".to_string()) && top.contains(&"model".to_string()));
    }

    #[test]
    fn the_closest_key_is_offered_only_when_it_is_close() {
        let valid = ["max_concurrent", "max_depth", "max_total", "timeout"];
        assert_eq!(closest("max_concurent", valid), Some("max_concurrent"));
        assert_eq!(closest("MAX_DEPHT", valid), Some("max_depth"));
        assert_eq!(closest("colour", valid), None);
        assert_eq!(
            hint(None, &["a".to_string(), "b".to_string()]),
            "valid keys: a, b"
        );
    }
}
