//! Evaluation (last match wins, default `ask`), merge (plain concatenation) and compaction
//! (the rules a later rule of the same key overrides left out, for rulesets that are stored).

use std::collections::HashSet;

use super::rule::{Action, Rule, Ruleset};
use super::wildcard::matches;

/// The outcome of [`evaluate`]: the action and the rule that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluation<'a> {
    /// What to do: the matching rule's action, or `ask` when no rule matched.
    pub action: Action,
    /// The last rule that matched; `None` when nothing matched and the default `ask` applied
    /// (OpenCode then reports the synthetic rule `{permission, pattern: "*", action: "ask"}`).
    pub rule: Option<&'a Rule>,
}

/// Decide `permission` for `pattern`: the last rule of the concatenated `rulesets` whose
/// `permission` and `pattern` wildcards both match wins; nothing matching means `ask`.
///
/// Later rulesets (and later rules within one) take precedence; specificity plays no part.
/// Does not allocate: the rulesets are walked in reverse and the first match is returned.
pub fn evaluate<'a>(permission: &str, pattern: &str, rulesets: &[&'a [Rule]]) -> Evaluation<'a> {
    let rule = rulesets
        .iter()
        .rev()
        .flat_map(|ruleset| ruleset.iter().rev())
        .find(|rule| matches(permission, &rule.permission) && matches(pattern, &rule.pattern));
    Evaluation {
        action: rule.map_or(Action::Ask, |rule| rule.action),
        rule,
    }
}

/// Concatenate rulesets in order: no dedupe, no sorting (position is precedence).
pub fn merge(rulesets: &[&[Rule]]) -> Ruleset {
    rulesets.concat()
}

/// `rules` without those a later rule of the same permission and pattern overrides: the same
/// decisions (last match wins) from fewer rules, for a ruleset that is stored.
pub fn compact(rules: Ruleset) -> Ruleset {
    let same = |a: &Rule, b: &Rule| a.permission == b.permission && a.pattern == b.pattern;
    let keep: Vec<bool> = if rules.len() <= SCANNED {
        // A usual ruleset is a few dozen rules at most, where comparing beats hashing.
        (0..rules.len())
            .map(|i| !rules[i + 1..].iter().any(|later| same(later, &rules[i])))
            .collect()
    } else {
        let mut seen: HashSet<(&str, &str), foldhash::fast::RandomState> = HashSet::default();
        let mut keep: Vec<bool> = rules
            .iter()
            .rev()
            .map(|rule| seen.insert((&*rule.permission, &*rule.pattern)))
            .collect();
        keep.reverse();
        keep
    };
    rules
        .into_iter()
        .zip(keep)
        .filter_map(|(rule, kept)| kept.then_some(rule))
        .collect()
}

/// The most rules [`compact`] compares pairwise; a longer ruleset is looked up by hashing.
const SCANNED: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{PermissionConfig, disabled, from_config};
    use Action::{Allow, Ask, Deny};
    use proptest::prelude::*;

    fn r(permission: &str, pattern: &str, action: Action) -> Rule {
        Rule::new(permission, pattern, action)
    }

    fn eval(permission: &str, pattern: &str, rules: &[Rule]) -> Action {
        evaluate(permission, pattern, &[rules]).action
    }

    fn config(json: &str) -> Ruleset {
        let config: PermissionConfig = serde_json::from_str(json).unwrap();
        from_config(&config, None)
    }

    #[test]
    fn nothing_matching_means_ask() {
        let e = evaluate("bash", "rm", &[]);
        assert_eq!(e.action, Ask);
        assert_eq!(e.rule, None);
        let other = [r("edit", "*", Allow)];
        let e = evaluate("bash", "rm", &[&other]);
        assert_eq!(
            e,
            Evaluation {
                action: Ask,
                rule: None
            }
        );
    }

    #[test]
    fn the_last_matching_rule_wins_within_and_across_rulesets() {
        let rules = [r("bash", "*", Allow), r("bash", "rm", Deny)];
        let e = evaluate("bash", "rm", &[&rules]);
        assert_eq!(e.action, Deny);
        assert!(std::ptr::eq(e.rule.unwrap(), &rules[1]));
        let reversed = [r("bash", "rm", Deny), r("bash", "*", Allow)];
        assert_eq!(eval("bash", "rm", &reversed), Allow);
        // Across rulesets: the later ruleset wins.
        let a = [r("bash", "rm", Deny)];
        let b = [r("bash", "*", Allow)];
        assert_eq!(evaluate("bash", "rm", &[&a, &b]).action, Allow);
        assert_eq!(evaluate("bash", "rm", &[&b, &a]).action, Deny);
    }

    #[test]
    fn a_more_specific_pattern_does_not_beat_a_later_rule() {
        let rules = [
            r("edit", "src/components/*", Allow),
            r("edit", "src/*", Deny),
        ];
        assert_eq!(eval("edit", "src/components/Button.tsx", &rules), Deny);
    }

    #[test]
    fn the_permission_field_is_a_wildcard() {
        let rules = [r("mcp_*", "*", Allow)];
        assert_eq!(eval("mcp_server_tool", "x", &rules), Allow);
        assert_eq!(eval("bash", "x", &rules), Ask);
        let all = [r("*", "*", Deny)];
        assert_eq!(eval("anything", "x", &all), Deny);
    }

    #[test]
    fn merge_is_concatenation_in_order() {
        let a = [r("bash", "*", Allow)];
        let b = [r("bash", "*", Deny)];
        assert_eq!(
            merge(&[&a, &b]),
            vec![r("bash", "*", Allow), r("bash", "*", Deny)]
        );
        assert_eq!(
            merge(&[&b, &a]),
            vec![r("bash", "*", Deny), r("bash", "*", Allow)]
        );
        assert_eq!(merge(&[]), Ruleset::new());
        assert_eq!(eval("bash", "x", &merge(&[&a, &b])), Deny);
    }

    #[test]
    fn task_permission_configs_decide_by_agent_name() {
        let rules = config(r#"{"task": {"*": "allow", "code-reviewer": "deny"}}"#);
        assert_eq!(eval("task", "general", &rules), Allow);
        assert_eq!(eval("task", "code-reviewer", &rules), Deny);

        let rules = config(r#"{"task": {"*": "ask", "orchestrator-*": "deny"}}"#);
        assert_eq!(eval("task", "general", &rules), Ask);
        assert_eq!(eval("task", "orchestrator-fast", &rules), Deny);

        let rules = config(r#"{"task": {"general": "allow", "code-reviewer": "deny"}}"#);
        assert_eq!(eval("task", "unknown-agent", &rules), Ask);
        assert_eq!(eval("task", "general", &rules), Allow);

        let rules = config(r#"{"task": {"general": "allow", "*": "deny"}}"#);
        assert_eq!(eval("task", "general", &rules), Deny);
    }

    #[test]
    fn bash_prefix_rule_from_config() {
        let rules = config(r#"{"bash": {"*": "ask", "git *": "allow", "git push *": "deny"}}"#);
        assert_eq!(eval("bash", "git", &rules), Allow);
        assert_eq!(eval("bash", "git status --short", &rules), Allow);
        assert_eq!(eval("bash", "git push origin main", &rules), Deny);
        assert_eq!(eval("bash", "git push", &rules), Deny);
        assert_eq!(eval("bash", "gitk", &rules), Ask);
    }

    // ---- properties ----

    const PERMS: &[&str] = &["bash", "edit", "task", "mcp_x", "*", "mcp_*", "b?sh", "e*"];
    const PATTERNS: &[&str] = &["*", "rm", "rm *", "git *", "src/*", "a?", "", "ls", "x"];
    const VALUES: &[&str] = &[
        "rm",
        "rm -rf /",
        "git",
        "git status",
        "src/a.ts",
        "ab",
        "",
        "ls",
    ];

    fn action() -> impl Strategy<Value = Action> {
        proptest::sample::select(Action::ALL.to_vec())
    }

    fn rule() -> impl Strategy<Value = Rule> {
        (
            proptest::sample::select(PERMS),
            proptest::sample::select(PATTERNS),
            action(),
        )
            .prop_map(|(p, x, a)| Rule::new(p, x, a))
    }

    fn ruleset() -> impl Strategy<Value = Ruleset> {
        proptest::collection::vec(rule(), 0..8)
    }

    fn query() -> impl Strategy<Value = (&'static str, String)> {
        (
            proptest::sample::select(&PERMS[..4]),
            prop_oneof![
                proptest::sample::select(VALUES).prop_map(str::to_string),
                "[a-z /*?.-]{0,8}",
            ],
        )
    }

    /// Index of `rule` (by address) in the concatenation of `rulesets`.
    fn position(rulesets: &[&[Rule]], rule: Option<&Rule>) -> Option<usize> {
        let rule = rule?;
        rulesets
            .iter()
            .flat_map(|rs| rs.iter())
            .position(|r| std::ptr::eq(r, rule))
    }

    /// The definition, naively: findLast over the materialised concatenation.
    fn naive(permission: &str, pattern: &str, rules: &[Rule]) -> Option<usize> {
        rules
            .iter()
            .rposition(|r| matches(permission, &r.permission) && matches(pattern, &r.pattern))
    }

    #[test]
    fn compact_drops_the_rules_a_later_rule_of_the_same_key_overrides() {
        let rules = vec![
            r("*", "*", Allow),
            r("question", "*", Deny),
            r("read", "*.env", Ask),
            r("question", "*", Allow),
            r("read", "*", Allow),
            r("read", "*.env", Ask),
        ];
        assert_eq!(
            compact(rules),
            [
                r("*", "*", Allow),
                r("question", "*", Allow),
                r("read", "*", Allow),
                r("read", "*.env", Ask),
            ]
        );
    }

    #[test]
    fn a_long_ruleset_is_compacted_like_a_short_one() {
        // Past the length compared pairwise: each key overridden by its last rule, in order.
        let rules: Vec<Rule> = (0..200)
            .map(|i| {
                let action = [Allow, Deny, Ask][i % 3];
                r(&format!("tool{}", i % 70), "*", action)
            })
            .collect();
        let compacted = compact(rules.clone());
        assert_eq!(compacted.len(), 70);
        let expected: Vec<Rule> = rules[130..].to_vec();
        assert_eq!(compacted, expected);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn matches_find_last_definition(a in ruleset(), b in ruleset(), (p, x) in query()) {
            let e = evaluate(p, &x, &[&a, &b]);
            let flat = merge(&[&a, &b]);
            let want = naive(p, &x, &flat);
            prop_assert_eq!(position(&[&a, &b], e.rule), want);
            prop_assert_eq!(e.action, want.map_or(Ask, |i| flat[i].action));
        }

        #[test]
        fn appending_catch_all_decides(
            rules in ruleset(),
            p in "[a-z_*?]{0,6}",
            x in "[a-z /*?.\n-]{0,8}",
            a in action(),
        ) {
            let mut rules = rules;
            rules.push(Rule::new(p.clone(), "*", a));
            let e = evaluate(&p, &x, &[&rules]);
            prop_assert_eq!(e.action, a);
            prop_assert!(std::ptr::eq(e.rule.unwrap(), rules.last().unwrap()));
        }

        #[test]
        fn a_compacted_ruleset_decides_as_the_whole_one(rules in ruleset(), (p, x) in query()) {
            let whole = evaluate(p, &x, &[&rules]);
            let compacted = compact(rules.clone());
            let fewer = evaluate(p, &x, &[&compacted]);
            prop_assert_eq!(whole.action, fewer.action);
            prop_assert_eq!(whole.rule, fewer.rule);
            prop_assert_eq!(disabled([p], &rules), disabled([p], &compacted));
        }

        #[test]
        fn merge_then_evaluate_equals_evaluate_over_both(
            a in ruleset(), b in ruleset(), (p, x) in query()
        ) {
            let merged = merge(&[&a, &b]);
            let split = evaluate(p, &x, &[&a, &b]);
            let joined = evaluate(p, &x, &[&merged]);
            prop_assert_eq!(split.action, joined.action);
            prop_assert_eq!(split.rule, joined.rule);
            prop_assert_eq!(position(&[&a, &b], split.rule), position(&[&merged], joined.rule));
        }

        #[test]
        fn prepending_never_changes_a_matched_decision(
            prefix in ruleset(), rules in ruleset(), (p, x) in query()
        ) {
            let before = evaluate(p, &x, &[&rules]);
            let after = evaluate(p, &x, &[&prefix, &rules]);
            if let Some(rule) = before.rule {
                prop_assert_eq!(after.action, before.action);
                prop_assert!(std::ptr::eq(after.rule.unwrap(), rule));
            } else {
                // Unmatched before: the prefix alone decides.
                prop_assert_eq!(after, evaluate(p, &x, &[&prefix]));
            }
        }
    }
}
