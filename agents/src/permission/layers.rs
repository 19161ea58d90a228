//! Rules in layers: a session's own rules and, for a child session, the effective rules of
//! every caller above it. Delegation never widens rights: each layer is decided on its own
//! (last match wins inside it, nothing matching is `ask`) and the strictest answer holds
//! (deny > ask > allow), so a caller's deny or ask anywhere up the chain still holds in its
//! children, whatever their own agent allows.

use std::sync::Arc;

use super::evaluate::evaluate;
use super::rule::{Action, Rule, Ruleset};
use super::wildcard::matches;

/// How strict an action is: allow < ask < deny.
fn strictness(action: Action) -> u8 {
    match action {
        Action::Allow => 0,
        Action::Ask => 1,
        Action::Deny => 2,
    }
}

/// The rules an ask is decided against: the session's own layer first (its agent's rules and
/// its session rules, merged), then one layer per caller, nearest caller first. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    own: Arc<[Rule]>,
    callers: Arc<[Ruleset]>,
}

impl Default for Layers {
    fn default() -> Self {
        Layers::single(Vec::new())
    }
}

impl Layers {
    /// The session's own rules under its callers' effective rules (`callers`, in any order:
    /// the strictest layer decides whatever its place).
    pub fn new(own: impl Into<Arc<[Rule]>>, callers: impl Into<Arc<[Ruleset]>>) -> Self {
        Layers {
            own: own.into(),
            callers: callers.into(),
        }
    }

    /// One layer: a session with no caller above it.
    pub fn single(own: impl Into<Arc<[Rule]>>) -> Self {
        Layers::new(own, Vec::new())
    }

    /// Whether `other` is this value or a clone of it (the same shared rules); rules equal
    /// but made apart are not the same.
    pub fn is_same(&self, other: &Layers) -> bool {
        Arc::ptr_eq(&self.own, &other.own) && Arc::ptr_eq(&self.callers, &other.callers)
    }

    /// The session's own layer (what decides which tools its model is offered).
    pub fn own(&self) -> &[Rule] {
        &self.own
    }

    /// The callers' layers.
    pub fn callers(&self) -> &[Ruleset] {
        &self.callers
    }

    /// Every layer, the session's own first.
    pub fn iter(&self) -> impl Iterator<Item = &[Rule]> {
        std::iter::once(&*self.own).chain(self.callers.iter().map(Vec::as_slice))
    }

    /// The strictest of the layers' decisions for `permission` on `pattern`.
    pub fn evaluate(&self, permission: &str, pattern: &str) -> Action {
        let mut strictest = Action::Allow;
        for layer in self.iter() {
            let action = evaluate(permission, pattern, &[layer]).action;
            if action == Action::Deny {
                return action;
            }
            if strictness(action) > strictness(strictest) {
                strictest = action;
            }
        }
        strictest
    }

    /// The rules for `permission` of the layers that deny it on `pattern` (what a denied
    /// model is shown).
    pub fn denying(&self, permission: &str, pattern: &str) -> Vec<Rule> {
        self.iter()
            .filter(|layer| evaluate(permission, pattern, &[layer]).action == Action::Deny)
            .flat_map(|layer| layer.iter())
            .filter(|r| matches(permission, &r.permission))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{Allow, Ask, Deny};

    fn r(permission: &str, pattern: &str, action: Action) -> Rule {
        Rule::new(permission, pattern, action)
    }

    #[test]
    fn one_layer_decides_as_evaluate_does() {
        let rules = vec![r("*", "*", Allow), r("bash", "rm *", Deny)];
        let layers = Layers::single(rules.clone());
        assert_eq!(layers.evaluate("bash", "ls"), Allow);
        assert_eq!(layers.evaluate("bash", "rm -rf x"), Deny);
        assert_eq!(layers.evaluate("edit", "a"), Allow);
        assert_eq!(Layers::default().evaluate("edit", "a"), Ask);
    }

    #[test]
    fn a_callers_deny_or_ask_holds_over_a_childs_allow() {
        let child = vec![r("*", "*", Allow)];
        let caller = vec![
            r("*", "*", Allow),
            r("bash", "*", Deny),
            r("edit", "*", Ask),
        ];
        let layers = Layers::new(child, vec![caller]);
        assert_eq!(layers.evaluate("bash", "ls"), Deny);
        assert_eq!(layers.evaluate("edit", "src/a.rs"), Ask);
        assert_eq!(layers.evaluate("read", "a"), Allow);
    }

    #[test]
    fn a_later_allow_in_another_layer_never_lifts_a_deny() {
        // Concatenated, the child's allow would win (last match); in layers it cannot.
        let child = vec![r("bash", "*", Allow)];
        let root = vec![r("bash", "*", Deny)];
        let middle = vec![r("*", "*", Allow)];
        let layers = Layers::new(child, vec![middle, root]);
        assert_eq!(layers.evaluate("bash", "git status"), Deny);
        let shown = layers.denying("bash", "git status");
        assert_eq!(
            shown,
            vec![r("bash", "*", Deny)],
            "only the denying layer's rules"
        );
    }

    #[test]
    fn the_childs_own_deny_holds_under_permissive_callers() {
        let child = vec![r("*", "*", Allow), r("todowrite", "*", Deny)];
        let caller = vec![r("*", "*", Allow)];
        let layers = Layers::new(child, vec![caller]);
        assert_eq!(layers.evaluate("todowrite", "*"), Deny);
        assert_eq!(layers.own().len(), 2);
        assert_eq!(layers.iter().count(), 2);
    }
}
