//! Resolved agents: the built-in agents' rulesets and every way configuration overrides them.

use taskforce_agents::agent::{AgentError, AgentMode, Registry, RuleOrigin};
use taskforce_agents::permission::Action::{self, Allow, Ask, Deny};

use super::fixture::Fixture;

fn decide(registry: &Registry, agent: &str, permission: &str, pattern: &str) -> Action {
    registry
        .get(agent)
        .unwrap()
        .evaluate(permission, pattern)
        .action
}

fn with_config(toml: &str) -> Registry {
    let f = Fixture::new();
    f.project_file("taskforce.toml", toml);
    f.registry()
}

#[test]
fn build_allows_tools_but_asks_for_env_files_and_outside_directories() {
    let f = Fixture::new();
    let r = f.registry();
    for p in ["edit", "bash", "task", "webfetch"] {
        assert_eq!(decide(&r, "build", p, "*"), Allow, "{p}");
    }
    assert_eq!(decide(&r, "build", "question", "*"), Allow);
    assert_eq!(decide(&r, "build", "plan_enter", "*"), Allow);
    assert_eq!(decide(&r, "build", "plan_exit", "*"), Deny);
    assert_eq!(decide(&r, "build", "doom_loop", "*"), Ask);
    assert_eq!(decide(&r, "build", "external_directory", "*"), Ask);
    let output = f.home.join(".local/share/taskforce/tool-output/tool_x");
    assert_eq!(
        decide(
            &r,
            "build",
            "external_directory",
            &output.display().to_string()
        ),
        Allow
    );
    for (path, want) in [
        ("src/a.ts", Allow),
        (".env", Ask),
        ("config/.env", Ask),
        (".env.local", Ask),
        (".env.example", Allow),
    ] {
        assert_eq!(decide(&r, "build", "read", path), want, "{path}");
    }
}

#[test]
fn plan_denies_edits_except_its_plan_files() {
    let r = Fixture::new().registry();
    assert_eq!(decide(&r, "plan", "edit", "*"), Deny);
    assert_eq!(decide(&r, "plan", "edit", "src/a.ts"), Deny);
    assert_eq!(decide(&r, "plan", "edit", ".taskforce/plans/x.md"), Allow);
    assert_eq!(decide(&r, "plan", "question", "*"), Allow);
    assert_eq!(decide(&r, "plan", "plan_exit", "*"), Allow);
    assert_eq!(decide(&r, "plan", "plan_enter", "*"), Deny);
    assert_eq!(decide(&r, "plan", "bash", "ls"), Allow);
    assert_eq!(decide(&r, "plan", "task", "general"), Allow);
    let plan = r.get("plan").unwrap();
    assert!(
        plan.disabled_tools.is_empty(),
        "edit has a non-* allow, so stays visible"
    );
}

#[test]
fn general_has_no_todos_and_explore_cannot_edit_or_delegate() {
    let r = Fixture::new().registry();
    assert_eq!(decide(&r, "general", "todowrite", "*"), Deny);
    assert_eq!(decide(&r, "general", "todoread", "*"), Deny);
    assert_eq!(decide(&r, "general", "question", "*"), Deny);
    assert_eq!(decide(&r, "general", "edit", "x"), Allow);
    assert_eq!(decide(&r, "general", "task", "explore"), Allow);
    assert_eq!(
        r.get("general").unwrap().disabled_tools,
        ["todowrite", "todoread", "question"]
    );
    assert_eq!(decide(&r, "explore", "edit", "x"), Deny);
    assert_eq!(decide(&r, "explore", "grep", "x"), Allow);
    assert_eq!(decide(&r, "explore", "doom_loop", "*"), Deny);
    assert_eq!(
        r.get("explore").unwrap().disabled_tools,
        [
            "write",
            "edit",
            "todowrite",
            "todoread",
            "task",
            "task_status",
            "task_cancel",
            "question",
            "skill"
        ]
    );
}

#[test]
fn hidden_agents_deny_everything_but_reading_tool_output() {
    let f = Fixture::new();
    let r = f.registry();
    let output = f
        .home
        .join(".local/share/taskforce/tool-output/tool_1")
        .display()
        .to_string();
    for name in ["compaction", "title", "summary"] {
        let agent = r.get(name).unwrap();
        assert!(agent.hidden && agent.native && agent.mode == AgentMode::Primary);
        for p in ["read", "bash", "doom_loop"] {
            assert_eq!(decide(&r, name, p, "*"), Deny, "{name} {p}");
        }
        assert_eq!(decide(&r, name, "external_directory", &output), Allow);
        assert_eq!(
            agent.disabled_tools.len(),
            taskforce_agents::tool::BUILTIN_TOOLS.len()
        );
    }
    assert_eq!(r.get("title").unwrap().temperature, Some(0.5));
}

#[test]
fn agent_rules_come_after_global_rules_and_record_their_origin() {
    let r = with_config(
        "[permission]\nbash = \"deny\"\n[agent.build.permission.bash]\n\"rm -rf *\" = \"deny\"\n\"git *\" = \"allow\"\n",
    );
    assert_eq!(decide(&r, "build", "bash", "rm -rf *"), Deny);
    assert_eq!(decide(&r, "build", "bash", "git status"), Allow);
    assert_eq!(decide(&r, "build", "bash", "ls"), Deny);
    assert_eq!(decide(&r, "plan", "bash", "git status"), Deny);
    assert_eq!(decide(&r, "build", "edit", "x"), Allow);
    let build = r.get("build").unwrap();
    let rule = build.evaluate("bash", "git status").rule.unwrap();
    let index = build.index_of(rule).unwrap();
    assert_eq!(build.origin_of(index), Some(&RuleOrigin::AgentConfig));
    let rule = build.evaluate("bash", "ls").rule.unwrap();
    let index = build.index_of(rule).unwrap();
    assert_eq!(build.origin_of(index), Some(&RuleOrigin::GlobalConfig));
    assert_eq!(build.origins.len(), build.permission.len());
}

#[test]
fn legacy_tools_keys_map_to_rules_and_explicit_permission_wins() {
    let r = with_config(
        "[agent.build.tools]\nbash = false\nread = false\n[agent.plan.tools]\nwrite = false\n[agent.general]\ntools = { bash = false }\npermission = { bash = \"ask\" }\n",
    );
    assert_eq!(decide(&r, "build", "bash", "ls"), Deny);
    assert_eq!(decide(&r, "build", "read", "a"), Deny);
    assert!(
        r.get("build")
            .unwrap()
            .disabled_tools
            .contains(&"bash".to_string())
    );
    assert_eq!(decide(&r, "plan", "edit", ".taskforce/plans/x.md"), Deny);
    // An explicit permission key overrides the legacy tools key.
    assert_eq!(decide(&r, "general", "bash", "ls"), Ask);

    let r = with_config("tools = { webfetch = false }\n[permission]\nwebfetch = \"ask\"\n");
    assert_eq!(decide(&r, "build", "webfetch", "x"), Ask);
}

#[test]
fn disable_removes_even_a_builtin_agent() {
    let r = with_config("[agent.explore]\ndisable = true\n");
    assert!(r.get("explore").is_none());
    assert!(!r.names().contains(&"explore".to_string()));
    assert!(matches!(
        r.require("explore"),
        Err(AgentError::NotFound { .. })
    ));
}

#[test]
fn custom_agents_keep_model_sampling_and_options_and_start_from_defaults() {
    let r = with_config(
        "[provider.openai]\n[agent.my_custom_agent]\nmodel = \"openai/gpt-4\"\ntemperature = 0.5\ntop_p = 0.9\noptions = { reasoningEffort = \"high\", random_property = \"hello\" }\n",
    );
    let a = r.get("my_custom_agent").unwrap();
    let model = a.model.as_ref().unwrap();
    assert_eq!(
        (model.provider_id.as_str(), model.model_id.as_str()),
        ("openai", "gpt-4")
    );
    assert_eq!(a.top_p, Some(0.9));
    assert_eq!(a.temperature, Some(0.5));
    assert_eq!(a.mode, AgentMode::All);
    assert!(!a.native);
    assert_eq!(a.options["random_property"], "hello");
    assert_eq!(a.options["reasoningEffort"], "high");
    // Custom agents start from the defaults plus the global rules.
    assert_eq!(decide(&r, "my_custom_agent", "read", ".env"), Ask);
    assert_eq!(r.names().last().unwrap(), "my_custom_agent");
}

#[test]
fn steps_and_description_override_a_builtin_agent() {
    let r = with_config(
        "[agent.build]\nsteps = 50\ndescription = \"Mine\"\n[agent.plan]\nmaxSteps = 100\n",
    );
    let build = r.get("build").unwrap();
    assert_eq!(build.steps, Some(50));
    assert!(build.native);
    assert_eq!(build.description.as_deref(), Some("Mine"));
    assert_eq!(r.get("plan").unwrap().steps, Some(100));
    assert_eq!(r.get("general").unwrap().steps, None);
}

#[test]
fn an_unknown_agent_is_an_error_naming_the_known_ones() {
    let r = Fixture::new().registry();
    assert!(r.get("does_not_exist").is_none());
    let err = r.require("does_not_exist").unwrap_err().to_string();
    assert!(
        err.contains("does_not_exist") && err.contains("build, plan"),
        "{err}"
    );
}

#[test]
fn markdown_agents_are_named_by_path_and_modes_default_to_primary() {
    let f = Fixture::new();
    f.project_file(
        ".opencode/agent/review/security.md",
        "---\ndescription: Security\nmode: subagent\npermission:\n  edit: deny\n---\nFind holes.",
    );
    f.project_file(
        ".taskforce/mode/focus.md",
        "---\ndescription: Focus\nmode: subagent\n---\nFocus.",
    );
    let r = f.registry();
    let a = r.get("review/security").unwrap();
    assert_eq!(a.prompt.as_deref(), Some("Find holes."));
    assert_eq!(a.mode, AgentMode::Subagent);
    assert!(a.disabled_tools.contains(&"write".to_string()));
    assert_eq!(r.get("focus").unwrap().mode, AgentMode::Primary);
}

#[test]
fn claude_tools_allow_only_those_tools() {
    let f = Fixture::new();
    f.project_file(
        ".claude/agents/reviewer.md",
        "---\nname: code-reviewer\ndescription: Reviews\ntools: Read, Grep, Glob\n---\nReview.",
    );
    let r = f.registry();
    let a = r.get("code-reviewer").unwrap();
    assert_eq!(a.mode, AgentMode::Subagent);
    assert_eq!(decide(&r, "code-reviewer", "read", "src/a.rs"), Allow);
    assert_eq!(decide(&r, "code-reviewer", "grep", "x"), Allow);
    assert_eq!(decide(&r, "code-reviewer", "bash", "ls"), Deny);
    assert_eq!(decide(&r, "code-reviewer", "edit", "x"), Deny);
    assert_eq!(
        a.disabled_tools,
        [
            "bash",
            "write",
            "edit",
            "list",
            "todowrite",
            "todoread",
            "task",
            "task_status",
            "task_cancel",
            "question",
            "skill",
            "webfetch",
            "websearch",
            "codesearch"
        ]
    );
}

#[test]
fn the_tool_output_rule_is_kept_unless_denied_exactly() {
    let f = Fixture::new();
    let inside = f
        .home
        .join(".local/share/taskforce/tool-output/t")
        .display()
        .to_string();
    f.project_file(
        "taskforce.toml",
        "[permission]\nexternal_directory = \"deny\"\n",
    );
    let r = f.registry();
    assert_eq!(decide(&r, "build", "external_directory", "/etc/*"), Deny);
    assert_eq!(decide(&r, "build", "external_directory", &inside), Allow);

    // Denying exactly the tool-output glob is respected: the rule is not appended.
    let f = Fixture::new();
    let glob = f
        .home
        .join(".local/share/taskforce/tool-output/*")
        .display()
        .to_string();
    f.project_file(
        "taskforce.toml",
        &format!("[permission.external_directory]\n\"{glob}\" = \"deny\"\n"),
    );
    let inside = f
        .home
        .join(".local/share/taskforce/tool-output/t")
        .display()
        .to_string();
    assert_eq!(
        decide(&f.registry(), "build", "external_directory", &inside),
        Deny
    );
}

#[test]
fn default_agent_rules_and_listing_order() {
    let r = Fixture::new().registry();
    assert_eq!(r.default_agent().name, "build");
    assert_eq!(
        r.names(),
        [
            "build",
            "plan",
            "general",
            "explore",
            "compaction",
            "title",
            "summary"
        ]
    );
    let r = with_config("default_agent = \"plan\"\n");
    assert_eq!(r.default_agent().name, "plan");
    assert_eq!(r.names()[..3], ["plan", "build", "general"]);

    let r = with_config("[agent.build]\ndisable = true\n");
    assert_eq!(r.default_agent().name, "plan");

    let err = |toml: &str| {
        let f = Fixture::new();
        f.project_file("taskforce.toml", toml);
        let loaded = f.load();
        Registry::new(&loaded.config, &loaded.paths).unwrap_err()
    };
    assert_eq!(
        err("default_agent = \"nope\"\n").to_string(),
        "default agent \"nope\" not found; known agents: build, plan, general, explore, compaction, title, summary"
    );
    assert_eq!(
        err("default_agent = \"general\"\n"),
        AgentError::DefaultIsSubagent("general".into())
    );
    assert_eq!(
        err("default_agent = \"title\"\n"),
        AgentError::DefaultIsHidden("title".into())
    );
    assert_eq!(
        err(
            "[agent.build]\ndisable = true\n[agent.plan]\nmode = \"subagent\"\n[agent.compaction]\nhidden = true\n"
        ),
        AgentError::NoPrimary
    );
}

#[test]
fn agent_json_matches_opencode_shape() {
    let r = with_config(
        "[provider.openai]\n[agent.rev]\nmodel = \"openai/gpt-4o\"\nsteps = 5\ncolor = \"#ff0000\"\n",
    );
    let v = serde_json::to_value(r.get("rev").unwrap()).unwrap();
    assert_eq!(v["name"], "rev");
    assert_eq!(v["mode"], "all");
    assert_eq!(v["native"], false);
    assert_eq!(v["hidden"], false);
    assert_eq!(
        v["model"],
        serde_json::json!({"providerID": "openai", "modelID": "gpt-4o"})
    );
    assert_eq!(v["steps"], 5);
    assert_eq!(
        v["permission"][0],
        serde_json::json!({"permission": "*", "pattern": "*", "action": "allow"})
    );
    assert!(v["disabledTools"].is_array());
    assert!(v.get("origins").is_none());
    assert!(v.get("temperature").is_none());
}

#[test]
fn skills_are_found_with_the_registry_and_their_folders_are_readable_by_agents() {
    let f = Fixture::new();
    let global = f.home_file(
        ".config/taskforce/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Keep notes\n---\nWrite them down.",
    );
    f.project_file(
        ".claude/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review code\n---\nLook closely.",
    );
    f.project_file(
        "taskforce.toml",
        "[agent.helper]\ndescription = \"A custom agent\"\n\n[permission.skill]\n\"rev*\" = \"deny\"\n",
    );
    let r = f.registry();
    let names: Vec<&str> = r.skills().list().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["notes", "review"]);
    assert_eq!(r.skills().get("notes").unwrap().location, global);
    let inside = global.parent().unwrap().join("scripts/run.sh");
    for agent in ["build", "plan", "helper"] {
        assert_eq!(
            decide(
                &r,
                agent,
                "external_directory",
                &inside.display().to_string()
            ),
            Allow,
            "{agent}"
        );
        let info = r.get(agent).unwrap();
        let rule = info
            .evaluate("external_directory", &inside.display().to_string())
            .rule
            .unwrap();
        let index = info.index_of(rule).unwrap();
        assert_eq!(info.origin_of(index), Some(&RuleOrigin::Skills), "{agent}");
    }
    // A folder beside the skill's is still asked about.
    let beside = global.parent().unwrap().with_file_name("other/x");
    assert_eq!(
        decide(
            &r,
            "build",
            "external_directory",
            &beside.display().to_string()
        ),
        Ask
    );
    // The global [permission] rules decide which skills each agent may load.
    assert_eq!(decide(&r, "build", "skill", "review"), Deny);
    assert_eq!(decide(&r, "helper", "skill", "notes"), Allow);
    let available: Vec<&str> = r
        .skills()
        .available(&r.get("build").unwrap().permission)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(available, ["notes"]);
}
