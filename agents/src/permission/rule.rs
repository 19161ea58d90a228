//! Action, Rule and Ruleset: the data of the permission engine.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// What happens when a rule matches: run, refuse, or ask the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The call runs without asking.
    Allow,
    /// The call is refused; the model sees the rules that refused it.
    Deny,
    /// The user is asked before the call runs.
    Ask,
}

impl Action {
    /// Every action, in the order they are listed in messages.
    pub const ALL: [Action; 3] = [Action::Allow, Action::Deny, Action::Ask];

    /// The strictest of `actions` (`deny` over `ask` over `allow`); `allow` when there are none.
    pub fn strictest(actions: impl IntoIterator<Item = Action>) -> Action {
        actions
            .into_iter()
            .max_by_key(|a| match a {
                Action::Allow => 0,
                Action::Ask => 1,
                Action::Deny => 2,
            })
            .unwrap_or(Action::Allow)
    }

    /// The lowercase name used in config files and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Ask => "ask",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a word that is not `allow`, `deny` or `ask`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission action `{0}`, expected one of `allow`, `deny`, `ask`")]
pub struct UnknownAction(pub String);

impl FromStr for Action {
    type Err = UnknownAction;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Action::Allow),
            "deny" => Ok(Action::Deny),
            "ask" => Ok(Action::Ask),
            other => Err(UnknownAction(other.to_string())),
        }
    }
}

/// One rule: for a permission (itself a wildcard) and a pattern (a wildcard), an action.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rule {
    /// The permission the rule governs (`bash`, `edit`, `task`, `mcp_*`, `*`…); a wildcard.
    // Shared text (see `shared`): rules are copied into every session's and step's layers.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    #[serde(deserialize_with = "shared_text")]
    pub permission: Arc<str>,
    /// The pattern the asked-for value must match (a command, a path, an agent name); a wildcard.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    #[serde(deserialize_with = "shared_text")]
    pub pattern: Arc<str>,
    /// What the rule decides.
    pub action: Action,
}

impl Rule {
    /// A rule from its three parts.
    pub fn new(permission: impl AsRef<str>, pattern: impl AsRef<str>, action: Action) -> Self {
        Rule {
            permission: shared(permission.as_ref()),
            pattern: shared(pattern.as_ref()),
            action,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} → {}",
            self.permission, self.pattern, self.action
        )
    }
}

/// The words rules name most (the permissions of the built-in tools, the wildcard): one copy
/// each, shared by every rule read that names them.
const COMMON: [&str; 22] = [
    "*",
    "read",
    "edit",
    "write",
    "bash",
    "glob",
    "grep",
    "list",
    "task",
    "todowrite",
    "todoread",
    "webfetch",
    "websearch",
    "codesearch",
    "question",
    "skill",
    "lsp",
    "external_directory",
    "doom_loop",
    "*.env",
    "*.env.*",
    "*.env.example",
];

/// `text` as a rule holds it: a common word is a shared copy, any other a copy of its own.
fn shared(text: &str) -> Arc<str> {
    static SHARED: LazyLock<[Arc<str>; COMMON.len()]> = LazyLock::new(|| COMMON.map(Arc::from));
    match COMMON.iter().position(|common| *common == text) {
        Some(i) => SHARED[i].clone(),
        None => Arc::from(text),
    }
}

/// Reads a rule's text straight into its shared form (see [`shared`]), without an
/// intermediate string.
fn shared_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Arc<str>, D::Error> {
    struct Text;
    impl Visitor<'_> for Text {
        type Value = Arc<str>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Arc<str>, E> {
            Ok(shared(text))
        }
    }
    deserializer.deserialize_str(Text)
}

/// An ordered list of rules; position is precedence (the last match wins).
pub type Ruleset = Vec<Rule>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_or_made_share_one_copy_of_a_common_word_and_keep_other_text_as_given() {
        let read: Vec<Rule> = serde_json::from_str(
            r#"[{"permission":"read","pattern":"*","action":"allow"},
                {"permission":"read","pattern":"docs/**","action":"deny"}]"#,
        )
        .unwrap();
        let made = Rule::new("read", "*", Action::Ask);
        assert!(Arc::ptr_eq(&read[0].permission, &read[1].permission));
        assert!(Arc::ptr_eq(&read[0].permission, &made.permission));
        assert!(Arc::ptr_eq(&read[0].pattern, &made.pattern));
        assert_eq!(&*read[1].pattern, "docs/**");
        assert_eq!(read[0], Rule::new("read", "*", Action::Allow));
        // The text is what was given, shared or not, and it is written back unchanged.
        let again: Vec<Rule> =
            serde_json::from_str(&serde_json::to_string(&read).unwrap()).unwrap();
        assert_eq!(again, read);
    }

    #[test]
    fn a_rule_whose_text_is_not_a_string_is_refused() {
        let err =
            serde_json::from_str::<Rule>(r#"{"permission":7,"pattern":"*","action":"allow"}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("expected a string"), "{err}");
    }
}
