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

#[test]
fn explain_bash_checks_every_command_a_line_runs() {
    let s = Sandbox::new();
    s.file(
        "taskforce.toml",
        "[permission.bash]\n\"*\" = \"allow\"\n\"rm *\" = \"deny\"\n",
    );
    for line in [
        "sudo rm -rf x",
        "/bin/rm x",
        "echo $(rm x)",
        "bash -c 'rm x'",
        "echo x | xargs rm",
        "true && rm x",
    ] {
        let json = s
            .ok(&["permission", "explain", "bash", line, "--json"])
            .json();
        assert_eq!(json["action"], "deny", "{line}: {json}");
        assert_eq!(json["rule"]["pattern"], "rm *", "{line}: {json}");
        let parts = json["parts"].as_array().unwrap();
        assert!(
            parts
                .iter()
                .any(|p| p["action"] == "deny" && p["pattern"].as_str().unwrap().starts_with("rm")),
            "{line}: {json}"
        );
    }

    let json = s
        .ok(&[
            "permission",
            "explain",
            "bash",
            "git status && cargo test 2>&1 | tail -n 5",
            "--json",
        ])
        .json();
    assert_eq!(json["action"], "allow");
    let patterns: Vec<&str> = json["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pattern"].as_str().unwrap())
        .collect();
    assert_eq!(patterns, ["git status", "cargo test 2>&1", "tail -n 5"]);

    let json = s
        .ok(&["permission", "explain", "bash", "$CMD x", "--json"])
        .json();
    assert_eq!(json["action"], "ask", "{json}");
    assert!(json["parts"][0]["unreadable"].is_string(), "{json}");

    let text = s
        .ok(&["permission", "explain", "bash", "timeout 5 rm x"])
        .stdout;
    assert!(text.starts_with("deny\n"), "{text}");
    assert!(
        text.contains("deny \"rm x\" (in \"timeout 5 rm x\")"),
        "{text}"
    );
    assert!(text.contains("rule #"), "{text}");
}

#[test]
fn explain_decides_skills_by_name_and_says_when_none_has_it() {
    let s = Sandbox::new();
    s.file(
        ".taskforce/skills/internal-db/SKILL.md",
        "---\nname: internal-db\ndescription: Poke the database\n---\nSteps.\n",
    );
    s.file(
        "taskforce.toml",
        "[permission.skill]\n\"internal-*\" = \"deny\"\n",
    );
    let text = s
        .ok(&["permission", "explain", "skill", "internal-db"])
        .stdout;
    assert!(text.starts_with("deny\n"), "{text}");
    assert!(text.contains("rule #"), "{text}");
    assert!(text.contains("skill \"internal-*\" → deny"), "{text}");
    assert!(!text.contains("no skill is called"), "{text}");
    let text = s.ok(&["permission", "explain", "skill", "release"]).stdout;
    assert!(text.starts_with("allow\n"), "{text}");
    assert!(
        text.contains("no skill is called \"release\" (found: internal-db)"),
        "{text}"
    );
    // Without rules of its own for `skill`, explore's deny-all hides the tool.
    s.file("taskforce.toml", "");
    let text = s
        .ok(&[
            "permission",
            "explain",
            "skill",
            "release",
            "--agent",
            "explore",
        ])
        .stdout;
    assert!(text.starts_with("deny\n"), "{text}");
    assert!(
        text.contains("the skill tool is hidden from this agent's model"),
        "{text}"
    );
}

#[test]
fn explain_webfetch_checks_the_address_as_the_tool_spells_it() {
    let s = Sandbox::new();
    s.file(
        "taskforce.toml",
        "[permission.webfetch]\n\"*\" = \"allow\"\n\"https://evil.com/*\" = \"deny\"\n",
    );
    let url = "HTTPS://Evil.COM:443/%61dmin";
    let json = s
        .ok(&["permission", "explain", "webfetch", url, "--json"])
        .json();
    assert_eq!(json["action"], "deny");
    assert_eq!(json["pattern"], "https://evil.com/admin");
    let text = s.ok(&["permission", "explain", "webfetch", url]).stdout;
    assert!(text.starts_with("deny\n"), "{text}");
    assert!(
        text.contains("the address is checked as \"https://evil.com/admin\""),
        "{text}"
    );
}

#[test]
fn explain_says_when_the_search_tools_are_not_offered() {
    let s = Sandbox::new();
    let text = s
        .ok(&[
            "permission",
            "explain",
            "websearch",
            "rust",
            "--agent",
            "explore",
        ])
        .stdout;
    assert!(text.starts_with("allow\n"), "{text}");
    assert!(
        text.contains(
            "the websearch tool is not offered: no search backend is configured under [search]"
        ),
        "{text}"
    );
    s.file("taskforce.toml", "[search]\nengine = \"exa\"\n");
    let text = s
        .ok(&[
            "permission",
            "explain",
            "codesearch",
            "rust",
            "--agent",
            "explore",
        ])
        .stdout;
    assert!(!text.contains("not offered"), "{text}");
}

#[test]
fn mcp_tools_are_explained_and_listed_by_their_servers_name_pattern() {
    let s = Sandbox::new();
    s.file(
        "taskforce.toml",
        "[mcp.github]\ntype = \"local\"\ncommand = [\"github-mcp\"]\n\n[mcp.\"my.docs\"]\ntype = \"remote\"\nurl = \"https://example.com/mcp\"\n\n[permission]\n\"github_*\" = \"ask\"\n\"my_docs_*\" = \"deny\"\n",
    );
    let text = s
        .ok(&["permission", "explain", "github_create_issue", "*"])
        .stdout;
    assert!(text.starts_with("ask\n"), "{text}");
    assert!(text.contains("rule #"), "{text}");
    assert!(text.contains("a tool of MCP server github"), "{text}");
    let text = s
        .ok(&["permission", "explain", "my_docs_search", "*"])
        .stdout;
    assert!(text.starts_with("deny\n"), "{text}");
    assert!(text.contains("hidden from this agent's model"), "{text}");
    let shown = s.ok(&["agents", "show", "build"]).stdout;
    assert!(shown.contains("  github: github_*  ask\n"), "{shown}");
    assert!(
        shown.contains("  my.docs: my_docs_*  hidden from the model\n"),
        "{shown}"
    );
}
