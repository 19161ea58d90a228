//! The config form of permissions and its translation to rules (`fromConfig`).
//!
//! In a config file, `permission` is either a bare action (`"ask"`, meaning `{"*": "ask"}`) or a
//! map `{permission: action | {pattern: action}}`. **The written key order is kept** (in the outer
//! and the inner maps) because evaluation is last-match-wins, so order is precedence.
//!
//! Deserialization is hand-written and driven by `deserialize_any`, so it works from any
//! self-describing format (JSON, `serde_json::Value`, YAML, the `config` crate) and its errors
//! name the offending permission and pattern instead of serde's generic untagged-enum message.

use std::fmt;
use std::path::Path;

use indexmap::IndexMap;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::disabled::permission_for_tool;
use super::rule::{Action, Rule, Ruleset};

/// The value of one permission key: one action for every pattern, or actions per pattern.
///
/// Equality is order-sensitive (unlike `IndexMap`'s): order is precedence.
#[derive(Debug, Clone, Eq)]
pub enum PermissionValue {
    /// `bash: "allow"`: the action for every pattern (the rule pattern is `"*"`).
    Action(Action),
    /// `bash: {"*": "ask", "git *": "allow"}`: one rule per entry, in written order.
    Patterns(IndexMap<String, Action>),
}

/// A `permission` config: permission key → value, in written order.
///
/// Deserializes from a bare action string (= `{"*": action}`) or a map; serializes as a map
/// (so a bare string comes back as `{"*": action}`, which reads back to the same value).
/// Equality is order-sensitive (unlike `IndexMap`'s): order is precedence.
#[derive(Debug, Clone, Default, Eq)]
pub struct PermissionConfig(pub IndexMap<String, PermissionValue>);

impl PartialEq for PermissionValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PermissionValue::Action(a), PermissionValue::Action(b)) => a == b,
            (PermissionValue::Patterns(a), PermissionValue::Patterns(b)) => a.iter().eq(b.iter()),
            _ => false,
        }
    }
}

impl PartialEq for PermissionConfig {
    fn eq(&self, other: &Self) -> bool {
        self.0.iter().eq(other.0.iter())
    }
}

impl PermissionConfig {
    /// An empty config (no rules).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the config has no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Deep-merge `other` on top of `self` (OpenCode's `mergeDeep(self, other)`).
    ///
    /// For each key of `other`, in its order: a key already in `self` keeps its position and gets
    /// `other`'s value, except that two pattern maps are merged the same way one level down
    /// (existing patterns keep their position and take the new action, new patterns are
    /// appended); a key not in `self` is appended. An action replaces a pattern map and vice versa.
    ///
    /// Used for layered configs (global, project, `OPENCODE_PERMISSION`) and, per agent, to apply
    /// an explicit `permission` over [`from_tools`] (there the tools side only holds actions, so
    /// this equals OpenCode's shallow `Object.assign(tools, permission)`).
    pub fn merge_over(&mut self, other: &PermissionConfig) {
        for (key, value) in &other.0 {
            match (self.0.get_mut(key), value) {
                (Some(PermissionValue::Patterns(mine)), PermissionValue::Patterns(theirs)) => {
                    for (pattern, action) in theirs {
                        mine.insert(pattern.clone(), *action);
                    }
                }
                (Some(mine), theirs) => *mine = theirs.clone(),
                (None, theirs) => {
                    self.0.insert(key.clone(), theirs.clone());
                }
            }
        }
    }
}

impl From<Action> for PermissionConfig {
    /// The bare-action form: `{"*": action}`.
    fn from(action: Action) -> Self {
        let mut map = IndexMap::new();
        map.insert("*".to_string(), PermissionValue::Action(action));
        PermissionConfig(map)
    }
}

impl FromIterator<(String, PermissionValue)> for PermissionConfig {
    fn from_iter<I: IntoIterator<Item = (String, PermissionValue)>>(iter: I) -> Self {
        PermissionConfig(iter.into_iter().collect())
    }
}

/// Expand a leading `~` or `$HOME` in a pattern: `~/x`, `~`, `$HOME/x`, `$HOME…`; nothing else.
///
/// A tilde elsewhere (`/some/~/path`) is kept, and with `home` `None` the pattern is unchanged.
/// A trailing `/` on `home` is dropped before joining so `~/x` with home `/` gives `/x`.
pub fn expand_home(pattern: &str, home: Option<&Path>) -> String {
    let Some(home) = home else {
        return pattern.to_string();
    };
    let rest = if pattern == "~" {
        ""
    } else if let Some(rest) = pattern.strip_prefix('~').filter(|r| r.starts_with('/')) {
        rest
    } else if let Some(rest) = pattern.strip_prefix("$HOME") {
        rest
    } else {
        return pattern.to_string();
    };
    let home = home.to_string_lossy();
    if rest.is_empty() {
        return home.into_owned();
    }
    let trimmed = home.trim_end_matches('/');
    format!("{trimmed}{rest}")
}

/// Translate a config into rules, in written order: an action gives `{key, "*", action}`, a
/// pattern map one rule per `(pattern, action)` with home-expanded patterns.
pub fn from_config(config: &PermissionConfig, home: Option<&Path>) -> Ruleset {
    let mut rules = Ruleset::new();
    for (permission, value) in &config.0 {
        match value {
            PermissionValue::Action(action) => rules.push(Rule::new(permission, "*", *action)),
            PermissionValue::Patterns(patterns) => {
                rules.extend(patterns.iter().map(|(pattern, action)| {
                    Rule::new(permission, expand_home(pattern, home), *action)
                }));
            }
        }
    }
    rules
}

/// The legacy `tools: {name: bool}` map as a config: `true` → allow, `false` → deny, with
/// `write`/`edit`/`patch`/`multiedit` all setting the `edit` key (the last one written wins,
/// at the position of the first).
///
/// Per agent, an explicit `permission` map is applied over this result with
/// [`PermissionConfig::merge_over`] (OpenCode: `Object.assign(permission, agent.permission)`:
/// permission keys override the tools keys in place, new keys are appended).
pub fn from_tools(tools: &IndexMap<String, bool>) -> PermissionConfig {
    let mut config = PermissionConfig::new();
    for (tool, enabled) in tools {
        let action = if *enabled {
            Action::Allow
        } else {
            Action::Deny
        };
        config.0.insert(
            permission_for_tool(tool).to_string(),
            PermissionValue::Action(action),
        );
    }
    config
}

// ---------------------------------------------------------------------------------------------
// Serialize

impl Serialize for PermissionValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PermissionValue::Action(action) => action.serialize(serializer),
            PermissionValue::Patterns(patterns) => {
                let mut map = serializer.serialize_map(Some(patterns.len()))?;
                for (pattern, action) in patterns {
                    map.serialize_entry(pattern, action)?;
                }
                map.end()
            }
        }
    }
}

impl Serialize for PermissionConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

// ---------------------------------------------------------------------------------------------
// Deserialize
//
// Three visitors, one per level: the whole config, one permission's value, one pattern's action.
// Each names where it is in its errors and rejects every other input type with its own message.

/// Where a value sits, for error messages.
#[derive(Clone, Copy)]
struct Place<'k> {
    permission: Option<&'k str>,
    pattern: Option<&'k str>,
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.permission, self.pattern) {
            (Some(permission), Some(pattern)) => {
                write!(f, "permission `{permission}` pattern `{pattern}`: ")
            }
            (Some(permission), None) => write!(f, "permission `{permission}`: "),
            (None, Some(pattern)) => write!(f, "pattern `{pattern}`: "),
            (None, None) => Ok(()),
        }
    }
}

fn parse_action<E: de::Error>(place: Place<'_>, word: &str) -> Result<Action, E> {
    word.parse::<Action>()
        .map_err(|unknown| E::custom(format_args!("{place}{unknown}")))
}

/// Implements every `visit_*` a visitor does not accept as a call to `self.reject(found)`.
macro_rules! reject_other_types {
    () => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Bool(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Signed(v)))
        }
        fn visit_i128<E: de::Error>(self, _: i128) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Other("integer")))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Unsigned(v)))
        }
        fn visit_u128<E: de::Error>(self, _: u128) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Other("integer")))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Float(v)))
        }
        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Bytes(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Unit))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(self.reject(Unexpected::Option))
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_any(self)
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(
            self,
            inner: D,
        ) -> Result<Self::Value, D::Error> {
            inner.deserialize_any(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(self.reject(Unexpected::Seq))
        }
        fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(self.reject(Unexpected::Enum))
        }
    };
}

/// The whole config: a bare action or a map of permission → value.
struct ConfigVisitor;

impl ConfigVisitor {
    fn reject<E: de::Error>(&self, found: Unexpected<'_>) -> E {
        E::custom(format_args!(
            "permission config: expected an action (`allow`, `deny`, `ask`) or a map of \
             permission → action or {{pattern: action}}, found {found}"
        ))
    }
}

impl<'de> Visitor<'de> for ConfigVisitor {
    type Value = PermissionConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an action or a map of permission → action or {pattern: action}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let place = Place {
            permission: None,
            pattern: None,
        };
        parse_action(place, v).map(PermissionConfig::from)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = IndexMap::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(ValueSeed {
                permission: Some(&key),
            })?;
            // A repeated key keeps its first position and takes the last value (as JSON.parse).
            entries.insert(key, value);
        }
        Ok(PermissionConfig(entries))
    }

    reject_other_types!();
}

impl<'de> Deserialize<'de> for PermissionConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ConfigVisitor)
    }
}

/// One permission's value: an action or a map of pattern → action.
struct ValueSeed<'k> {
    permission: Option<&'k str>,
}

impl ValueSeed<'_> {
    fn reject<E: de::Error>(&self, found: Unexpected<'_>) -> E {
        let place = Place {
            permission: self.permission,
            pattern: None,
        };
        E::custom(format_args!(
            "{place}expected an action or a map of pattern → action, found {found}"
        ))
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = PermissionValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = PermissionValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an action or a map of pattern → action")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let place = Place {
            permission: self.permission,
            pattern: None,
        };
        parse_action(place, v).map(PermissionValue::Action)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut patterns = IndexMap::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(pattern) = map.next_key::<String>()? {
            let action = map.next_value_seed(ActionSeed {
                place: Place {
                    permission: self.permission,
                    pattern: Some(&pattern),
                },
            })?;
            patterns.insert(pattern, action);
        }
        Ok(PermissionValue::Patterns(patterns))
    }

    reject_other_types!();
}

impl<'de> Deserialize<'de> for PermissionValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ValueSeed { permission: None }.deserialize(deserializer)
    }
}

/// One pattern's action.
struct ActionSeed<'k> {
    place: Place<'k>,
}

impl ActionSeed<'_> {
    fn reject<E: de::Error>(&self, found: Unexpected<'_>) -> E {
        E::custom(format_args!(
            "{}expected an action (`allow`, `deny`, `ask`), found {found}",
            self.place
        ))
    }
}

impl<'de> DeserializeSeed<'de> for ActionSeed<'_> {
    type Value = Action;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ActionSeed<'_> {
    type Value = Action;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an action (`allow`, `deny`, `ask`)")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        parse_action(self.place, v)
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.reject(Unexpected::Map))
    }

    reject_other_types!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{disabled, evaluate};
    use Action::{Allow, Ask, Deny};
    use proptest::prelude::*;
    use std::path::PathBuf;

    fn r(permission: &str, pattern: &str, action: Action) -> Rule {
        Rule::new(permission, pattern, action)
    }

    fn json(text: &str) -> PermissionConfig {
        serde_json::from_str(text).unwrap()
    }

    fn json_err(text: &str) -> String {
        serde_json::from_str::<PermissionConfig>(text)
            .unwrap_err()
            .to_string()
    }

    fn patterns(entries: &[(&str, Action)]) -> PermissionValue {
        PermissionValue::Patterns(entries.iter().map(|(p, a)| (p.to_string(), *a)).collect())
    }

    // ---- translation to rules (`fromConfig`) ----

    #[test]
    fn an_action_string_gives_a_star_rule() {
        assert_eq!(
            from_config(&json(r#"{"bash": "allow"}"#), None),
            [r("bash", "*", Allow)]
        );
    }

    #[test]
    fn rules_keep_the_written_order_unsorted() {
        let config =
            json(r#"{"bash": {"*": "allow", "rm": "deny"}, "edit": "allow", "webfetch": "ask"}"#);
        assert_eq!(
            from_config(&config, None),
            [
                r("bash", "*", Allow),
                r("bash", "rm", Deny),
                r("edit", "*", Allow),
                r("webfetch", "*", Ask),
            ]
        );
        // Written order, not sorted order, in both levels.
        let config =
            json(r#"{"webfetch": "ask", "bash": {"rm": "deny", "*": "allow"}, "*": "deny"}"#);
        assert_eq!(
            from_config(&config, None),
            [
                r("webfetch", "*", Ask),
                r("bash", "rm", Deny),
                r("bash", "*", Allow),
                r("*", "*", Deny),
            ]
        );
    }

    #[test]
    fn a_leading_tilde_expands_to_home() {
        let home = PathBuf::from("/home/tester");
        let home = Some(home.as_path());
        let config = json(r#"{"external_directory": {"~/projects/*": "allow"}}"#);
        assert_eq!(
            from_config(&config, home),
            [r("external_directory", "/home/tester/projects/*", Allow)]
        );
        // Without a home nothing is expanded.
        assert_eq!(
            from_config(&config, None),
            [r("external_directory", "~/projects/*", Allow)]
        );
        // Action-form values keep "*" as is.
        assert_eq!(
            from_config(&json(r#"{"read": "deny"}"#), home),
            [r("read", "*", Deny)]
        );

        assert_eq!(expand_home("~/x", home), "/home/tester/x");
        assert_eq!(expand_home("~", home), "/home/tester");
        assert_eq!(expand_home("$HOME/x", home), "/home/tester/x");
        assert_eq!(expand_home("$HOME", home), "/home/tester");
        assert_eq!(expand_home("$HOMEfoo", home), "/home/testerfoo");
        assert_eq!(expand_home("/some/~/path", home), "/some/~/path");
        assert_eq!(expand_home("~user/x", home), "~user/x");
        assert_eq!(expand_home("x/$HOME", home), "x/$HOME");
        assert_eq!(expand_home("*", home), "*");
        assert_eq!(expand_home("~/x", None), "~/x");
        assert_eq!(expand_home("$HOME", None), "$HOME");
        // A trailing slash on home does not double up.
        let slash = PathBuf::from("/home/tester/");
        assert_eq!(expand_home("~/x", Some(&slash)), "/home/tester/x");
        let root = PathBuf::from("/");
        assert_eq!(expand_home("~/x", Some(&root)), "/x");
        assert_eq!(expand_home("~", Some(&root)), "/");
    }

    // ---- deserialization ----

    #[test]
    fn bare_action_is_star_map() {
        let config = json(r#""deny""#);
        assert_eq!(config, PermissionConfig::from(Deny));
        assert_eq!(from_config(&config, None), [r("*", "*", Deny)]);
    }

    #[test]
    fn from_serde_json_value_keeps_order() {
        let value = serde_json::json!({"z": "allow", "a": {"y": "deny", "b": "ask"}});
        let config = PermissionConfig::deserialize(&value).unwrap();
        assert_eq!(
            from_config(&config, None),
            [r("z", "*", Allow), r("a", "y", Deny), r("a", "b", Ask)]
        );
        let config: PermissionConfig = serde_json::from_value(value).unwrap();
        assert_eq!(config.0.keys().collect::<Vec<_>>(), ["z", "a"]);
    }

    #[test]
    fn from_yaml_keeps_order() {
        let yaml = "z: allow\nbash:\n  'git *': allow\n  '*': ask\n  rm: deny\nedit: deny\n";
        let config: PermissionConfig = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(
            from_config(&config, None),
            [
                r("z", "*", Allow),
                r("bash", "git *", Allow),
                r("bash", "*", Ask),
                r("bash", "rm", Deny),
                r("edit", "*", Deny),
            ]
        );
        let bare: PermissionConfig = serde_yaml_ng::from_str("ask").unwrap();
        assert_eq!(bare, PermissionConfig::from(Ask));
        let err = serde_yaml_ng::from_str::<PermissionConfig>("bash: 3").unwrap_err();
        assert!(
            err.to_string()
                .contains("permission `bash`: expected an action"),
            "{err}"
        );
    }

    #[test]
    fn from_config_crate_keeps_order() {
        let text = r#"{"permission": {"webfetch": "ask", "bash": {"rm *": "deny", "*.env": "ask", "*": "allow"}, "edit": "deny"}}"#;
        let built = ::config::Config::builder()
            .add_source(::config::File::from_str(text, ::config::FileFormat::Json))
            .build()
            .unwrap();
        let config: PermissionConfig = built.get("permission").unwrap();
        assert_eq!(
            from_config(&config, None),
            [
                r("webfetch", "*", Ask),
                r("bash", "rm *", Deny),
                r("bash", "*.env", Ask),
                r("bash", "*", Allow),
                r("edit", "*", Deny),
            ]
        );
        let toml = "[permission]\nwebfetch = \"ask\"\nedit = \"deny\"\n[permission.bash]\n\"rm *\" = \"deny\"\n\"*\" = \"allow\"\n";
        let built = ::config::Config::builder()
            .add_source(::config::File::from_str(toml, ::config::FileFormat::Toml))
            .build()
            .unwrap();
        let config: PermissionConfig = built.get("permission").unwrap();
        assert_eq!(
            from_config(&config, None),
            [
                r("webfetch", "*", Ask),
                r("edit", "*", Deny),
                r("bash", "rm *", Deny),
                r("bash", "*", Allow),
            ]
        );
        let built = ::config::Config::builder()
            .add_source(::config::File::from_str(
                r#"{"permission": 5}"#,
                ::config::FileFormat::Json,
            ))
            .build()
            .unwrap();
        let err = built.get::<PermissionConfig>("permission").unwrap_err();
        assert!(
            err.to_string().contains("permission config: expected"),
            "{err}"
        );
    }

    #[test]
    fn duplicate_key_keeps_first_position_and_last_value() {
        let config = json(r#"{"bash": "allow", "edit": "ask", "bash": "deny"}"#);
        assert_eq!(
            from_config(&config, None),
            [r("bash", "*", Deny), r("edit", "*", Ask)]
        );
    }

    #[test]
    fn clear_errors() {
        let err = json_err(r#""alow""#);
        assert!(
            err.contains(
                "unknown permission action `alow`, expected one of `allow`, `deny`, `ask`"
            ),
            "{err}"
        );
        let err = json_err(r#"{"bash": "alow"}"#);
        assert!(
            err.contains("permission `bash`: unknown permission action `alow`, expected one of `allow`, `deny`, `ask`"),
            "{err}"
        );
        let err = json_err(r#"{"bash": 3}"#);
        assert!(
            err.contains("permission `bash`: expected an action or a map of pattern → action, found integer `3`"),
            "{err}"
        );
        let err = json_err(r#"{"bash": ["allow"]}"#);
        assert!(
            err.contains("permission `bash`: expected an action or a map"),
            "{err}"
        );
        let err = json_err(r#"{"bash": {"rm": "alow"}}"#);
        assert!(
            err.contains("permission `bash` pattern `rm`: unknown permission action `alow`"),
            "{err}"
        );
        let err = json_err(r#"{"bash": {"rm": true}}"#);
        assert!(
            err.contains("permission `bash` pattern `rm`: expected an action (`allow`, `deny`, `ask`), found boolean `true`"),
            "{err}"
        );
        let err = json_err(r#"{"bash": {"rm": {"x": "allow"}}}"#);
        assert!(
            err.contains("permission `bash` pattern `rm`: expected an action"),
            "{err}"
        );
        let err = json_err("[1]");
        assert!(
            err.contains("permission config: expected an action"),
            "{err}"
        );
        let err = json_err("null");
        assert!(err.contains("permission config: expected"), "{err}");
        for err in [
            json_err(r#"{"bash": 3}"#),
            json_err(r#"{"bash": {"rm": 1}}"#),
        ] {
            assert!(!err.contains("untagged"), "{err}");
            assert!(!err.contains("did not match any variant"), "{err}");
        }
    }

    #[test]
    fn permission_value_alone() {
        let v: PermissionValue = serde_json::from_str(r#""ask""#).unwrap();
        assert_eq!(v, PermissionValue::Action(Ask));
        let v: PermissionValue = serde_json::from_str(r#"{"b": "deny", "a": "allow"}"#).unwrap();
        assert_eq!(v, patterns(&[("b", Deny), ("a", Allow)]));
        let err = serde_json::from_str::<PermissionValue>("1").unwrap_err();
        assert!(
            err.to_string()
                .contains("expected an action or a map of pattern"),
            "{err}"
        );
    }

    #[test]
    fn serializes_to_the_same_shape() {
        let text = r#"{"webfetch":"ask","bash":{"rm":"deny","*":"allow"},"*":"deny"}"#;
        let config = json(text);
        assert_eq!(serde_json::to_string(&config).unwrap(), text);
        let back: PermissionConfig =
            serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
        assert_eq!(
            serde_json::to_string(&json(r#""allow""#)).unwrap(),
            r#"{"*":"allow"}"#
        );
        let yaml = serde_yaml_ng::to_string(&config).unwrap();
        assert_eq!(
            serde_yaml_ng::from_str::<PermissionConfig>(&yaml).unwrap(),
            config
        );
    }

    #[test]
    fn equality_is_order_sensitive() {
        assert_ne!(
            json(r#"{"a": "allow", "b": "deny"}"#),
            json(r#"{"b": "deny", "a": "allow"}"#)
        );
        assert_ne!(
            json(r#"{"a": {"x": "allow", "y": "deny"}}"#),
            json(r#"{"a": {"y": "deny", "x": "allow"}}"#)
        );
        assert_eq!(
            json(r#"{"a": {"x": "allow"}}"#),
            json(r#"{"a": {"x": "allow"}}"#)
        );
        assert_ne!(json(r#"{"a": "allow"}"#), json(r#"{"a": {"*": "allow"}}"#));
    }

    // ---- merge_over ----

    #[test]
    fn merge_over_is_deep_and_keeps_positions() {
        let mut base = json(
            r#"{"bash": {"*": "ask", "rm": "deny"}, "edit": "allow", "read": {"*": "allow"}}"#,
        );
        let over = json(
            r#"{"webfetch": "deny", "bash": {"git *": "allow", "*": "allow"}, "edit": {"*.md": "deny"}, "read": "ask"}"#,
        );
        base.merge_over(&over);
        assert_eq!(
            base,
            PermissionConfig(
                [
                    (
                        "bash".to_string(),
                        patterns(&[("*", Allow), ("rm", Deny), ("git *", Allow)])
                    ),
                    ("edit".to_string(), patterns(&[("*.md", Deny)])),
                    ("read".to_string(), PermissionValue::Action(Ask)),
                    ("webfetch".to_string(), PermissionValue::Action(Deny)),
                ]
                .into_iter()
                .collect()
            )
        );
        // Merging into empty copies; merging empty changes nothing.
        let mut empty = PermissionConfig::new();
        empty.merge_over(&over);
        assert_eq!(empty, over);
        let before = base.clone();
        base.merge_over(&PermissionConfig::new());
        assert_eq!(base, before);
    }

    // ---- legacy tools ----

    #[test]
    fn from_tools_maps_booleans_and_edit_family() {
        let tools: IndexMap<String, bool> = [
            ("bash", false),
            ("read", true),
            ("write", false),
            ("webfetch", true),
            ("patch", true),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let config = from_tools(&tools);
        assert_eq!(
            from_config(&config, None),
            [
                r("bash", "*", Deny),
                r("read", "*", Allow),
                // write=false then patch=true: last one wins at the first position.
                r("edit", "*", Allow),
                r("webfetch", "*", Allow),
            ]
        );
    }

    #[test]
    fn legacy_tools_map_to_rules_and_explicit_permission_overrides_them() {
        let tools: IndexMap<String, bool> =
            [("bash".to_string(), false), ("read".to_string(), false)]
                .into_iter()
                .collect();
        let rules = from_config(&from_tools(&tools), None);
        assert_eq!(evaluate("bash", "ls", &[&rules]).action, Deny);
        assert_eq!(evaluate("read", "a.ts", &[&rules]).action, Deny);
        assert_eq!(disabled(["bash", "read", "edit"], &rules), ["bash", "read"]);

        let tools: IndexMap<String, bool> = [("write".to_string(), false)].into_iter().collect();
        let rules = from_config(&from_tools(&tools), None);
        assert_eq!(evaluate("edit", "a.ts", &[&rules]).action, Deny);

        // Explicit permission overrides the tools key in place; new keys are appended.
        let tools: IndexMap<String, bool> =
            [("bash".to_string(), false), ("read".to_string(), true)]
                .into_iter()
                .collect();
        let mut config = from_tools(&tools);
        config.merge_over(&json(r#"{"task": "deny", "bash": {"git *": "allow"}}"#));
        assert_eq!(
            from_config(&config, None),
            [
                r("bash", "git *", Allow),
                r("read", "*", Allow),
                r("task", "*", Deny)
            ]
        );
    }

    // ---- properties ----

    /// Keys that often collide (to exercise merging) or look like real patterns.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof!["[ab*]{0,2}", "[a-z*?~$ ._/-]{0,6}"]
    }

    fn value() -> impl Strategy<Value = PermissionValue> {
        let action = proptest::sample::select(Action::ALL.to_vec());
        prop_oneof![
            action.clone().prop_map(PermissionValue::Action),
            proptest::collection::vec((key(), action), 0..5).prop_map(|entries| {
                let mut map = IndexMap::new();
                for (pattern, action) in entries {
                    map.entry(pattern).or_insert(action);
                }
                PermissionValue::Patterns(map)
            }),
        ]
    }

    fn entries() -> impl Strategy<Value = Vec<(String, PermissionValue)>> {
        proptest::collection::vec((key(), value()), 0..6).prop_map(|entries| {
            let mut seen = std::collections::HashSet::new();
            entries
                .into_iter()
                .filter(|(k, _)| seen.insert(k.clone()))
                .collect()
        })
    }

    /// Write entries as JSON text by hand, in the given order.
    fn write_json(entries: &[(String, PermissionValue)]) -> String {
        let quote = |s: &str| serde_json::to_string(s).unwrap();
        let body: Vec<String> = entries
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    PermissionValue::Action(a) => quote(a.as_str()),
                    PermissionValue::Patterns(map) => {
                        let inner: Vec<String> = map
                            .iter()
                            .map(|(p, a)| format!("{}: {}", quote(p), quote(a.as_str())))
                            .collect();
                        format!("{{{}}}", inner.join(", "))
                    }
                };
                format!("{}: {}", quote(key), value)
            })
            .collect();
        format!("{{{}}}", body.join(", "))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn from_config_rules_come_out_in_written_order(entries in entries()) {
            let text = write_json(&entries);
            let expected: Vec<Rule> = entries
                .iter()
                .flat_map(|(key, value)| match value {
                    PermissionValue::Action(a) => vec![Rule::new(key, "*", *a)],
                    PermissionValue::Patterns(map) => map
                        .iter()
                        .map(|(p, a)| Rule::new(key, p, *a))
                        .collect(),
                })
                .collect();
            let from_text: PermissionConfig = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(from_config(&from_text, None), expected.clone());
            let from_yaml: PermissionConfig = serde_yaml_ng::from_str(&text).unwrap();
            prop_assert_eq!(from_config(&from_yaml, None), expected);
            // And it serializes back to the same text shape.
            let back: PermissionConfig =
                serde_json::from_str(&serde_json::to_string(&from_text).unwrap()).unwrap();
            prop_assert_eq!(back, from_text);
        }

        #[test]
        fn merge_over_keeps_old_positions_and_appends_new(a in entries(), b in entries()) {
            let mut merged: PermissionConfig = a.iter().cloned().collect();
            let over: PermissionConfig = b.iter().cloned().collect();
            merged.merge_over(&over);
            // Key order: a's keys first (in order), then b's new keys (in order).
            let mut want: Vec<&String> = a.iter().map(|(k, _)| k).collect();
            want.extend(b.iter().map(|(k, _)| k).filter(|k| !a.iter().any(|(ak, _)| ak == *k)));
            prop_assert_eq!(merged.0.keys().collect::<Vec<_>>(), want);
            // Values: b wins for its keys (deeply for two pattern maps).
            for (key, theirs) in &b {
                let got = &merged.0[key];
                match (a.iter().find(|(k, _)| k == key).map(|(_, v)| v), theirs) {
                    (Some(PermissionValue::Patterns(mine)), PermissionValue::Patterns(theirs)) => {
                        let PermissionValue::Patterns(got) = got else {
                            panic!("pattern maps merge to a pattern map");
                        };
                        for (p, action) in theirs {
                            prop_assert_eq!(got[p], *action);
                        }
                        for (p, action) in mine {
                            if !theirs.contains_key(p) {
                                prop_assert_eq!(got[p], *action);
                            }
                        }
                        let mut order: Vec<&String> = mine.keys().collect();
                        order.extend(theirs.keys().filter(|p| !mine.contains_key(*p)));
                        prop_assert_eq!(got.keys().collect::<Vec<_>>(), order);
                    }
                    _ => prop_assert_eq!(got, theirs),
                }
            }
        }
    }
}
