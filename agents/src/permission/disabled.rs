//! Hiding tools from the model (`PermissionNext.disabled`).

use super::rule::{Action, Rule};
use super::wildcard::matches;

/// The tools governed by the `edit` permission (`apply_patch` is deliberately not among them).
const EDIT_TOOLS: [&str; 4] = ["edit", "write", "patch", "multiedit"];

/// The permission a tool is checked under: `edit`/`write`/`patch`/`multiedit` → `edit`, else the tool id.
pub fn permission_for_tool(tool: &str) -> &str {
    if EDIT_TOOLS.contains(&tool) {
        "edit"
    } else {
        tool
    }
}

/// The tools to hide from the model, in input order: those whose last rule (matched on permission
/// only) is a `"*"`-pattern deny.
///
/// Only the *last* rule whose `permission` wildcard matches the tool's permission counts, and its
/// pattern is not matched against anything: it must be exactly `"*"` and its action `deny`. So
/// `task: {"*": "deny", "ops": "allow"}` keeps `task` visible (the last rule allows `ops`).
/// OpenCode calls this with the agent's ruleset only, not the session's.
pub fn disabled<'t>(tools: impl IntoIterator<Item = &'t str>, ruleset: &[Rule]) -> Vec<String> {
    tools
        .into_iter()
        .filter(|tool| {
            let permission = permission_for_tool(tool);
            ruleset
                .iter()
                .rev()
                .find(|rule| matches(permission, &rule.permission))
                .is_some_and(|rule| &*rule.pattern == "*" && rule.action == Action::Deny)
        })
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{PermissionConfig, from_config};
    use Action::{Allow, Ask, Deny};

    fn r(permission: &str, pattern: &str, action: Action) -> Rule {
        Rule::new(permission, pattern, action)
    }

    #[test]
    fn deny_all_hides_every_tool() {
        let rules = [r("*", "*", Deny)];
        assert_eq!(
            disabled(["bash", "edit", "read"], &rules),
            ["bash", "edit", "read"]
        );
    }

    #[test]
    fn a_later_allow_keeps_a_tool_visible() {
        let rules = [r("*", "*", Deny), r("bash", "*", Allow)];
        assert_eq!(disabled(["bash", "edit", "read"], &rules), ["edit", "read"]);
    }

    #[test]
    fn a_configured_task_deny_all_hides_task() {
        let config: PermissionConfig = serde_json::from_str(r#"{"task": {"*": "deny"}}"#).unwrap();
        let rules = from_config(&config, None);
        assert_eq!(disabled(["task"], &rules), ["task"]);
    }

    #[test]
    fn edit_write_patch_and_multiedit_are_hidden_by_an_edit_deny() {
        let rules = [r("edit", "*", Deny)];
        assert_eq!(
            disabled(
                ["edit", "write", "patch", "multiedit", "apply_patch"],
                &rules
            ),
            ["edit", "write", "patch", "multiedit"]
        );
        assert_eq!(permission_for_tool("write"), "edit");
        assert_eq!(permission_for_tool("apply_patch"), "apply_patch");
        assert_eq!(permission_for_tool("bash"), "bash");
    }

    #[test]
    fn only_the_last_rule_counts_and_pattern_is_not_matched() {
        // A later allow of one pattern keeps the tool visible, though `*` is denied.
        let config: PermissionConfig =
            serde_json::from_str(r#"{"task": {"*": "deny", "ops": "allow"}}"#).unwrap();
        assert!(disabled(["task"], &from_config(&config, None)).is_empty());
        // A later non-"*" deny does not hide it either.
        let rules = [r("bash", "rm", Deny)];
        assert!(disabled(["bash"], &rules).is_empty());
        // Nor does a "*" ask.
        let rules = [r("bash", "*", Ask)];
        assert!(disabled(["bash"], &rules).is_empty());
        // The last matching rule decides even when an earlier one is a "*" deny.
        let rules = [r("bash", "*", Deny), r("b*", "*", Allow)];
        assert!(disabled(["bash"], &rules).is_empty());
        let rules = [
            r("b*", "*", Allow),
            r("bash", "*", Deny),
            r("edit", "*", Allow),
        ];
        assert_eq!(disabled(["bash", "edit"], &rules), ["bash"]);
        // No rule at all: visible.
        assert!(disabled(["bash"], &[]).is_empty());
    }

    #[test]
    fn keeps_input_order() {
        let rules = [r("*", "*", Deny)];
        assert_eq!(
            disabled(["read", "bash", "edit"], &rules),
            ["read", "bash", "edit"]
        );
        let owned = [String::from("z"), String::from("a")];
        assert_eq!(
            disabled(owned.iter().map(String::as_str), &rules),
            ["z", "a"]
        );
    }
}
