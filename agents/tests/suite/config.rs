//! Loading layered configuration from real files.

use std::time::Duration;

use taskforce_agents::permission::{Action, PermissionValue};

use super::fixture::Fixture;

#[test]
fn layers_apply_in_precedence_order() {
    let mut f = Fixture::new();
    f.home_file(
        ".config/taskforce/config.toml",
        "model = \"g/global\"\nsmall_model = \"g/small\"\ndefault_agent = \"build\"\n[provider.g]\ntype = \"openai\"\n[provider.p]\ntype = \"openai\"\n[provider.e]\ntype = \"openai\"\n[provider.v]\ntype = \"openai\"\n",
    );
    f.project_file("taskforce.toml", "model = \"p/project\"\n");
    let loaded = f.load();
    assert_eq!(loaded.config.model.unwrap().to_string(), "p/project");
    assert_eq!(loaded.config.small_model.unwrap().to_string(), "g/small");

    let extra = f.project_file("extra.toml", "model = \"e/explicit\"\n");
    f.config_file = Some(extra);
    assert_eq!(f.load().config.model.unwrap().to_string(), "e/explicit");

    f.set_env("TASKFORCE_MODEL", "v/env");
    f.set_env("TASKFORCE_DEFAULT_AGENT", "plan");
    let loaded = f.load();
    assert_eq!(loaded.config.model.unwrap().to_string(), "v/env");
    assert_eq!(loaded.config.default_agent.as_deref(), Some("plan"));
}

#[test]
fn taskforce_config_names_a_file_and_the_flag_wins() {
    let mut f = Fixture::new();
    let a = f.project_file("a.toml", "model = \"scripted/a\"\n");
    f.set_env("TASKFORCE_CONFIG", &a.display().to_string());
    assert_eq!(f.load().config.model.unwrap().to_string(), "scripted/a");
    f.config_file = Some(f.project_file("b.toml", "model = \"scripted/b\"\n"));
    assert_eq!(f.load().config.model.unwrap().to_string(), "scripted/b");
}

#[test]
fn a_missing_explicit_file_is_an_error() {
    let mut f = Fixture::new();
    f.set_env("TASKFORCE_CONFIG", "/definitely/not/here.toml");
    let err = f.load_error();
    assert!(err.contains("/definitely/not/here.toml"), "{err}");
    assert!(err.contains("TASKFORCE_CONFIG"), "{err}");
}

#[test]
fn permission_key_order_survives_every_layer() {
    let f = Fixture::new();
    f.home_file(
        ".config/taskforce/config.toml",
        "[permission]\nzeta = \"allow\"\nalpha = \"deny\"\n[permission.bash]\n\"*\" = \"ask\"\n\"git *\" = \"allow\"\n\"git push *\" = \"deny\"\n",
    );
    f.project_file(
        "taskforce.json",
        r#"{"permission": {"mid": "ask", "zeta": "deny", "bash": {"rm *": "deny", "*": "allow"}}}"#,
    );
    let loaded = f.load();
    let permission = loaded.config.permission.unwrap();
    let keys: Vec<&str> = permission.0.keys().map(String::as_str).collect();
    assert_eq!(keys, ["zeta", "alpha", "bash", "mid"]);
    assert_eq!(permission.0["zeta"], PermissionValue::Action(Action::Deny));
    let PermissionValue::Patterns(bash) = &permission.0["bash"] else {
        panic!("bash should be a pattern map");
    };
    let patterns: Vec<(&str, Action)> = bash.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        patterns,
        [
            ("*", Action::Allow),
            ("git *", Action::Allow),
            ("git push *", Action::Deny),
            ("rm *", Action::Deny)
        ]
    );
}

#[test]
fn inner_project_folders_win_over_the_git_root() {
    let f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        "model = \"scripted/root\"\ndefault_agent = \"plan\"\n",
    );
    f.project_file("sub/taskforce.toml", "model = \"scripted/sub\"\n");
    let loaded = f.try_load_in(&f.project.join("sub")).unwrap();
    assert_eq!(loaded.config.model.unwrap().to_string(), "scripted/sub");
    assert_eq!(loaded.config.default_agent.as_deref(), Some("plan"));
    assert_eq!(loaded.paths.project_root, f.project);
}

#[test]
fn unknown_mode_names_the_file_the_key_and_the_allowed_values() {
    let f = Fixture::new();
    f.project_file("taskforce.toml", "[agent.reviewer]\nmode = \"helper\"\n");
    let err = f.load_error();
    assert!(
        err.starts_with("taskforce.toml: key `agent.reviewer.mode`"),
        "{err}"
    );
    assert!(err.contains("`primary`, `subagent`, `all`"), "{err}");
}

#[test]
fn unknown_top_level_key_is_named() {
    let f = Fixture::new();
    f.project_file("taskforce.toml", "modle = \"openai/gpt-4o\"\n");
    let err = f.load_error();
    assert_eq!(
        err,
        "unknown key \"modle\" in the top level of taskforce.toml; did you mean \"model\"?"
    );
}

#[test]
fn toml_syntax_errors_name_file_and_line() {
    let f = Fixture::new();
    f.project_file("taskforce.toml", "model = \"a/b\"\ndefault_agent = \n");
    let err = f.load_error();
    assert!(err.starts_with("taskforce.toml:"), "{err}");
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn bad_model_strings_and_actions_are_explained() {
    let f = Fixture::new();
    f.project_file("taskforce.toml", "model = \"gpt-4o\"\n");
    let err = f.load_error();
    assert!(
        err.contains("key `model`") && err.contains("<provider>/<model>"),
        "{err}"
    );

    let f = Fixture::new();
    f.project_file("taskforce.toml", "[permission]\nbash = \"alow\"\n");
    let err = f.load_error();
    assert!(
        err.contains("`alow`") && err.contains("`allow`, `deny`, `ask`"),
        "{err}"
    );
}

#[test]
fn environment_errors_name_the_variable() {
    let mut f = Fixture::new();
    f.set_env("TASKFORCE_SUBAGENT__MAX_DEPTH", "lots");
    let err = f.load_error();
    assert!(err.contains("TASKFORCE_SUBAGENT__MAX_DEPTH"), "{err}");
}

#[test]
fn nested_environment_keys_and_unrelated_variables() {
    let mut f = Fixture::new();
    f.set_env("TASKFORCE_SUBAGENT__MAX_DEPTH", "3");
    f.set_env("TASKFORCE_SUBAGENT__TIMEOUT", "90s");
    f.set_env("TASKFORCE_SERVER_PASSWORD", "not a config key");
    let config = f.load().config;
    assert_eq!(config.subagent.max_depth, 3);
    assert_eq!(config.subagent.timeout, Duration::from_secs(90));
    assert_eq!(config.subagent.max_concurrent, 8);
    assert_eq!(config.subagent.max_total, 64);
    assert_eq!(config.subagent.max_per_session, 100);
    assert_eq!(config.subagent.idle_timeout, Duration::from_secs(180));
}

#[test]
fn subagent_limits_are_validated() {
    let f = Fixture::new();
    f.project_file("taskforce.toml", "[subagent]\ntimeout = \"soon\"\n");
    let err = f.load_error();
    assert!(
        err.contains("subagent.timeout") && err.contains("\"15m\""),
        "{err}"
    );

    let f = Fixture::new();
    f.project_file("taskforce.toml", "[subagent]\nmax_concurrent = 0\n");
    assert!(f.load_error().contains("subagent.max_concurrent"));
    for key in ["max_total", "max_per_session"] {
        let f = Fixture::new();
        f.project_file("taskforce.toml", &format!("[subagent]\n{key} = 0\n"));
        assert!(f.load_error().contains(&format!("subagent.{key}")));
    }
}

#[test]
fn data_dir_precedence() {
    let mut f = Fixture::new();
    let loaded = f.load();
    assert_eq!(loaded.paths.data_dir, f.home.join(".local/share/taskforce"));
    f.project_file("taskforce.toml", "data_dir = \"~/tfdata\"\n");
    assert_eq!(f.load().paths.data_dir, f.home.join("tfdata"));
    f.set_env("TASKFORCE_DATA_DIR", "/srv/tf");
    assert_eq!(f.load().paths.data_dir, std::path::PathBuf::from("/srv/tf"));
}

#[test]
fn providers_need_a_known_type() {
    let f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        "[provider.openai]\napi_key = \"sk-secret\"\n[provider.local]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n[provider.local.models.\"llama3.1:8b\"]\ncontext = 128000\ncost = { input = 0.15, output = 0.6 }\n",
    );
    let config = f.load().config;
    assert_eq!(
        config.provider["local"].models["llama3.1:8b"].context,
        Some(128000)
    );
    assert!(
        !format!("{config:?}").contains("sk-secret"),
        "secrets must not be printed"
    );

    let f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        "[provider.mine]\nbase_url = \"http://x\"\n",
    );
    let err = f.load_error();
    assert!(
        err.contains("provider.mine.type") && err.contains("`openai`"),
        "{err}"
    );

    let f = Fixture::new();
    f.project_file("taskforce.toml", "[provider.mine]\ntype = \"gemini\"\n");
    let err = f.load_error();
    assert!(
        err.contains("provider.mine.type") && err.contains("`anthropic`"),
        "{err}"
    );
}

#[test]
fn markdown_agents_and_commands_are_read() {
    let f = Fixture::new();
    f.project_file(
        ".taskforce/agent/review/security.md",
        "---\ndescription: Security review\nmode: subagent\n---\nYou look for vulnerabilities.\n",
    );
    f.project_file(
        ".opencode/agent/docs.md",
        "---\ndescription: Docs\n---\nWrite docs.",
    );
    f.project_file(
        ".taskforce/command/review.md",
        "---\ndescription: Review a change\nagent: review/security\nsubtask: true\n---\nReview $ARGUMENTS carefully.\n",
    );
    let config = f.load().config;
    let agent = &config.agent["review/security"];
    assert_eq!(
        agent.prompt.as_deref(),
        Some("You look for vulnerabilities.")
    );
    assert!(config.agent.contains_key("docs"));
    let command = &config.command["review"];
    assert_eq!(command.template, "Review $ARGUMENTS carefully.");
    assert_eq!(command.subtask, Some(true));
    assert_eq!(command.agent.as_deref(), Some("review/security"));
}

#[test]
fn markdown_yaml_errors_name_file_and_line() {
    let f = Fixture::new();
    f.project_file(
        ".taskforce/agent/broken.md",
        "---\ndescription: fine\nmode: [subagent\n---\nbody",
    );
    let err = f.load_error();
    assert!(err.starts_with(".taskforce/agent/broken.md:"), "{err}");
    let line: usize = err
        .split(':')
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no line number in {err}"));
    assert!((3..=5).contains(&line), "{err}");
}

#[test]
fn markdown_type_errors_name_the_frontmatter_key() {
    let f = Fixture::new();
    f.project_file(".taskforce/agent/x.md", "---\nsteps: many\n---\nbody");
    let err = f.load_error();
    assert!(
        err.starts_with(".taskforce/agent/x.md: key `steps`"),
        "{err}"
    );
}

#[test]
fn markdown_overrides_config_of_the_same_folder_and_explicit_file_overrides_markdown() {
    let mut f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        "[agent.docs]\ndescription = \"from toml\"\nsteps = 3\n",
    );
    f.project_file(
        ".taskforce/agent/docs.md",
        "---\ndescription: from markdown\n---\n",
    );
    let config = f.load().config;
    assert_eq!(
        config.agent["docs"].description.as_deref(),
        Some("from markdown")
    );
    assert_eq!(config.agent["docs"].steps, Some(3));
    f.config_file =
        Some(f.project_file("ci.toml", "[agent.docs]\ndescription = \"from --config\"\n"));
    assert_eq!(
        f.load().config.agent["docs"].description.as_deref(),
        Some("from --config")
    );
}

#[test]
fn claude_agents_resolve_aliases_and_warn_about_unknown_ones() {
    let f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        "[model_aliases]\nsonnet = \"anthropic/claude-sonnet-4-5\"\n[provider.anthropic]\n",
    );
    f.project_file(
        ".claude/agents/reviewer.md",
        "---\nname: code-reviewer\ndescription: Reviews code\ntools: Read, Grep\nmodel: sonnet\n---\nReview.",
    );
    f.home_file(
        ".claude/agents/tester.md",
        "---\nname: tester\ndescription: Tests\nmodel: haiku\n---\nTest.",
    );
    let loaded = f.load();
    let reviewer = &loaded.config.agent["code-reviewer"];
    assert_eq!(
        reviewer.model.as_ref().unwrap().to_string(),
        "anthropic/claude-sonnet-4-5"
    );
    assert!(loaded.config.agent["tester"].model.is_none());
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("\"haiku\""));
}

#[test]
fn bad_alias_targets_are_rejected() {
    let f = Fixture::new();
    f.project_file("taskforce.toml", "[model_aliases]\nsonnet = \"claude\"\n");
    assert!(f.load_error().contains("model_aliases.sonnet"));
}

#[test]
fn sources_list_the_files_read() {
    let f = Fixture::new();
    let a = f.project_file("taskforce.toml", "model = \"scripted/b\"\n");
    let b = f.project_file(".taskforce/agent/x.md", "body");
    assert_eq!(f.load().sources, vec![a, b]);
}
