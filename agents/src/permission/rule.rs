//! Action, Rule and Ruleset: the data of the permission engine.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
    pub permission: String,
    /// The pattern the asked-for value must match (a command, a path, an agent name); a wildcard.
    pub pattern: String,
    /// What the rule decides.
    pub action: Action,
}

impl Rule {
    /// A rule from its three parts.
    pub fn new(permission: impl Into<String>, pattern: impl Into<String>, action: Action) -> Self {
        Rule {
            permission: permission.into(),
            pattern: pattern.into(),
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

/// An ordered list of rules; position is precedence (the last match wins).
pub type Ruleset = Vec<Rule>;
