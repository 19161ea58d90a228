//! `taskforce permission explain`.

use super::support::Sandbox;

#[test]
fn explain_json_gives_action_and_rule() {
    let s = Sandbox::new();
    let json = s
        .ok(&["permission", "explain", "read", ".env", "--json"])
        .json();
    assert_eq!(
        json,
        serde_json::json!({"action": "ask", "rule": {"permission": "read", "pattern": "*.env", "action": "ask"}})
    );
    let json = s
        .ok(&[
            "permission",
            "explain",
            "edit",
            "src/a.rs",
            "--agent",
            "plan",
            "--json",
        ])
        .json();
    assert_eq!(json["action"], "deny");
    assert_eq!(json["rule"]["pattern"], "*");
}

#[test]
fn explain_uses_config_rules_and_names_their_origin() {
    let s = Sandbox::new();
    s.file(
        "taskforce.toml",
        "[permission.bash]\n\"*\" = \"ask\"\n\"git *\" = \"allow\"\n\"git push *\" = \"deny\"\n",
    );
    let json = s
        .ok(&[
            "permission",
            "explain",
            "bash",
            "git push origin main",
            "--json",
        ])
        .json();
    assert_eq!(json["action"], "deny");
    assert_eq!(json["rule"]["pattern"], "git push *");
    let json = s
        .ok(&["permission", "explain", "bash", "git", "--json"])
        .json();
    assert_eq!(
        json["action"], "allow",
        "a trailing \" *\" also matches the bare word"
    );
    let text = s.ok(&["permission", "explain", "bash", "git push"]).stdout;
    assert!(text.starts_with("deny\n"), "{text}");
    assert!(
        text.contains("from: the global [permission] config"),
        "{text}"
    );
}

#[test]
fn explain_maps_edit_family_tools() {
    let s = Sandbox::new();
    let out = s.ok(&[
        "permission",
        "explain",
        "write",
        "src/a.rs",
        "--agent",
        "explore",
    ]);
    assert!(out.stdout.starts_with("deny\n"), "{}", out.stdout);
    assert!(
        out.stdout.contains("asks for the `edit` permission"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("hidden from this agent's model"),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_with_unknown_agent_lists_known_agents() {
    let s = Sandbox::new();
    let err = s.usage_error(&["permission", "explain", "bash", "ls", "--agent", "ghost"]);
    assert!(
        err.contains("unknown agent \"ghost\"; known agents:"),
        "{err}"
    );
}
