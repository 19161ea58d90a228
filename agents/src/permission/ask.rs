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
    /// Ask the user even when the rules allow every pattern: part of the call could not be
    /// checked (a shell command the parser cannot read). A deny still refuses, and approvals
    /// from earlier "always" replies do not answer it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_ask: bool,
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
    /// No pattern is denied, and one needs the user (or the ask forces the question).
    Ask,
}

/// Evaluates the ask's patterns against `rulesets` (last match wins for each): the strictest
/// decides, so a denied pattern refuses the ask even after one that needs the user; all
/// allowed is allow, unless the ask forces the question.
pub fn decide(ask: &PermissionAsk, rulesets: &[&[Rule]]) -> AskDecision {
    decide_with_approvals(ask, &super::Layers::single(super::merge(rulesets)), &[])
}

/// What `layers` (each layer last-match-wins, the strictest layer holds) and the approvals say
/// about `ask`: a pattern the rules `ask` about is allowed when an approval (a rule from an
/// earlier "always" reply) allows it, a forced ask is asked whatever the approvals say, and a
/// deny anywhere wins. A deny carries the denying layers' rules for the permission (not the
/// approvals).
pub fn decide_with_approvals(
    ask: &PermissionAsk,
    layers: &super::Layers,
    approved: &[Rule],
) -> AskDecision {
    let mut needs_user = ask.force_ask;
    for pattern in &ask.patterns {
        match layers.evaluate(&ask.permission, pattern) {
            super::Action::Allow => {}
            super::Action::Deny => {
                return AskDecision::Deny(layers.denying(&ask.permission, pattern));
            }
            super::Action::Ask => {
                needs_user |= super::evaluate(&ask.permission, pattern, &[approved]).action
                    != super::Action::Allow;
            }
        }
    }
    if needs_user {
        AskDecision::Ask
    } else {
        AskDecision::Allow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{Action, Layers};

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
        // The strictest pattern decides: a deny after an ask still refuses.
        assert!(matches!(
            decide(&ask(&["git push x", "rm y"]), &[&rules]),
            AskDecision::Deny(_)
        ));
        assert!(matches!(
            decide(&ask(&["rm y", "git push x"]), &[&rules]),
            AskDecision::Deny(_)
        ));
    }

    #[test]
    fn a_forced_ask_is_asked_unless_denied() {
        let rules = vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("bash", "rm *", Action::Deny),
        ];
        let mut forced = ask(&["ls"]);
        forced.force_ask = true;
        assert_eq!(decide(&forced, &[&rules]), AskDecision::Ask);
        forced.patterns.push("rm x".into());
        assert!(matches!(decide(&forced, &[&rules]), AskDecision::Deny(_)));
        // An approval answers a pattern the rules ask about, never a forced ask.
        let ask_all = vec![Rule::new("*", "*", Action::Ask)];
        let approved = vec![Rule::new("bash", "ls *", Action::Allow)];
        assert_eq!(
            decide_with_approvals(&ask(&["ls"]), &Layers::single(ask_all.clone()), &approved),
            AskDecision::Allow
        );
        let mut forced = ask(&["ls"]);
        forced.force_ask = true;
        assert_eq!(
            decide_with_approvals(&forced, &Layers::single(ask_all), &approved),
            AskDecision::Ask
        );
    }
}
