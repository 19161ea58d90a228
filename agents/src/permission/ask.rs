//! A tool's permission ask and the ways it can be refused.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Rule;

/// What a tool asks permission for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PermissionAsk {
    /// The permission (`bash`, `edit`, `read`, `task`, `external_directory`, `doom_loop`…).
    pub permission: String,
    /// The values asked about, each evaluated in order.
    pub patterns: Vec<String>,
    /// The patterns an "always" reply approves from then on.
    pub always: Vec<String>,
    /// Details for the user (the command, the diff…).
    pub metadata: Map<String, Value>,
}

/// Why a permission ask failed; the `Display` text is what the model sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PermissionError {
    /// A rule denies the call.
    #[error(
        "The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules {}",
        serde_json::to_string(.rules).unwrap_or_default()
    )]
    Denied {
        /// The rules whose permission matches the ask.
        rules: Vec<Rule>,
    },
    /// The user rejected the call; the loop stops.
    #[error("The user rejected permission to use this specific tool call.")]
    Rejected,
    /// The user rejected the call with feedback; the loop continues.
    #[error(
        "The user rejected permission to use this specific tool call with the following feedback: {0}"
    )]
    Corrected(String),
}

/// What the rules alone say about an ask.
#[derive(Debug, Clone, PartialEq)]
pub enum AskDecision {
    /// Every pattern is allowed.
    Allow,
    /// A pattern is denied; these are the rules whose permission matches (for the model).
    Deny(Vec<Rule>),
    /// The patterns before this one are allowed; this one needs the user.
    Ask,
}

/// Evaluates the ask's patterns in order against `rulesets` (last match wins): the first deny
/// or ask decides; all allowed is allow (reference §3.7 step 2).
pub fn decide(ask: &PermissionAsk, rulesets: &[&[Rule]]) -> AskDecision {
    for pattern in &ask.patterns {
        match super::evaluate(&ask.permission, pattern, rulesets).action {
            super::Action::Allow => {}
            super::Action::Deny => {
                let rules = rulesets
                    .iter()
                    .flat_map(|r| r.iter())
                    .filter(|r| super::wildcard::matches(&ask.permission, &r.permission))
                    .cloned()
                    .collect();
                return AskDecision::Deny(rules);
            }
            super::Action::Ask => return AskDecision::Ask,
        }
    }
    AskDecision::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::Action;

    fn ask(patterns: &[&str]) -> PermissionAsk {
        PermissionAsk {
            permission: "bash".into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn patterns_decide_in_order() {
        let rules = vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("bash", "rm *", Action::Deny),
            Rule::new("bash", "git push *", Action::Ask),
        ];
        assert_eq!(
            decide(&ask(&["ls", "git status"]), &[&rules]),
            AskDecision::Allow
        );
        assert_eq!(
            decide(&ask(&["ls", "git push origin"]), &[&rules]),
            AskDecision::Ask
        );
        let AskDecision::Deny(shown) = decide(&ask(&["ls", "rm -rf /"]), &[&rules]) else {
            panic!("rm is denied")
        };
        assert_eq!(shown.len(), 3, "the rules whose permission matches bash");
        // The first pattern that is not allowed decides, even if a later one is denied.
        assert_eq!(
            decide(&ask(&["git push x", "rm y"]), &[&rules]),
            AskDecision::Ask
        );
    }
}
