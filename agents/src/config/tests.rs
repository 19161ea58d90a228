//! Configuration that says when it is wrong: unknown keys wherever they are written, models of
//! providers that are not configured, and environment variables that match no key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{ConfigError, LoadOptions, LoadedConfig, load};

/// A project (a git root) and a home, with a hermetic environment.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    env: BTreeMap<String, String>,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        let home = dir.path().join("home");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.display().to_string())]);
        Project {
            _dir: dir,
            root,
            env,
        }
    }

    fn with(rel: &str, text: &str) -> Project {
        let p = Project::new();
        p.file(rel, text);
        p
    }

    fn file(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn load(&self) -> Result<LoadedConfig, ConfigError> {
        load(&LoadOptions {
            cwd: self.root.clone(),
            config_file: None,
            data_dir: None,
            env: self.env.clone(),
        })
    }

    fn error(&self) -> String {
        match self.load() {
            Ok(_) => panic!("the configuration was accepted"),
            Err(e) => e.to_string(),
        }
    }
}

/// The message for `key` unknown in `section` of `file`, suggesting `suggestion`.
fn unknown(key: &str, section: &str, file: &str, suggestion: &str) -> String {
    format!("unknown key \"{key}\" in {section} of {file}; did you mean \"{suggestion}\"?")
}

#[test]
fn an_unknown_key_in_a_section_names_the_file_the_section_and_the_closest_key() {
    let p = Project::with("taskforce.toml", "[subagent]\nmax_concurent = 4\n");
    assert_eq!(
        p.error(),
        unknown(
            "max_concurent",
            "[subagent]",
            "taskforce.toml",
            "max_concurrent"
        )
    );
}

#[test]
fn unknown_keys_are_named_at_every_level_of_a_config_file() {
    let cases = [
        (
            "modle = \"scripted/x\"\n",
            "modle",
            "the top level",
            "model",
        ),
        (
            "[agent.build]\ntempature = 0.2\n",
            "tempature",
            "[agent.build]",
            "temperature",
        ),
        (
            "[provider.fake]\ntype = \"openai\"\nbase_ur = \"http://x\"\n",
            "base_ur",
            "[provider.fake]",
            "base_url",
        ),
        (
            "[provider.fake.models.m]\ncontxt = 1000\n",
            "contxt",
            "[provider.fake.models.m]",
            "context",
        ),
        (
            "[server]\nreplay_byte = 10\n",
            "replay_byte",
            "[server]",
            "replay_bytes",
        ),
        (
            "[command.hi]\ntemplate = \"x\"\nagnet = \"build\"\n",
            "agnet",
            "[command.hi]",
            "agent",
        ),
    ];
    for (text, key, section, suggestion) in cases {
        let p = Project::with("taskforce.toml", text);
        assert_eq!(
            p.error(),
            unknown(key, section, "taskforce.toml", suggestion),
            "{text}"
        );
    }
}

#[test]
fn a_key_like_no_valid_one_lists_the_valid_keys() {
    let p = Project::with("taskforce.toml", "[compaction]\nxyz = true\n");
    assert_eq!(
        p.error(),
        "unknown key \"xyz\" in [compaction] of taskforce.toml; valid keys: auto, prune"
    );
}

#[test]
fn unknown_frontmatter_keys_of_agent_and_command_files_are_errors() {
    let cases = [
        (".taskforce/agent/a.md", "descripton: x\n", "description"),
        (".opencode/agent/a.md", "hiden: true\n", "hidden"),
        (".taskforce/command/c.md", "subtsk: true\n", "subtask"),
        (
            ".claude/agents/a.md",
            "disallowedTool: Bash\n",
            "disallowedTools",
        ),
    ];
    for (file, front, suggestion) in cases {
        let p = Project::with(file, &format!("---\n{front}---\nbody\n"));
        let key = front.split(':').next().unwrap();
        assert_eq!(
            p.error(),
            unknown(key, "the frontmatter", file, suggestion),
            "{file}"
        );
    }
}

#[test]
fn every_key_opencode_and_claude_code_document_is_accepted() {
    let p = Project::new();
    p.file(
        ".opencode/agent/oc.md",
        "---\nmodel: scripted/x\nvariant: high\ntemperature: 0.1\ntop_p: 0.9\ntools: {bash: false}\ndisable: false\ndescription: d\nmode: subagent\nhidden: true\noptions: {a: 1}\ncolor: \"#ffffff\"\nsteps: 3\nmaxSteps: 4\npermission: {edit: deny}\nname: oc\n---\nbody\n",
    );
    p.file(
        ".claude/agents/cc.md",
        "---\nname: cc\ndescription: d\ntools: Read\ndisallowedTools: Bash\nmodel: inherit\npermissionMode: plan\nmaxTurns: 3\nskills: [s]\nmcpServers: [m]\nhooks: {}\nmemory: project\nbackground: false\neffort: high\nisolation: worktree\ninitialPrompt: hi\ncolor: blue\n---\nbody\n",
    );
    let config = p.load().unwrap().config;
    assert_eq!(config.agent["oc"].options["a"], 1);
    assert!(config.agent.contains_key("cc"));
}

#[test]
fn a_model_of_a_provider_not_configured_is_an_error_naming_the_configured_ones() {
    let providers = "[provider.fake]\ntype = \"openai\"\n";
    let cases = [
        (
            "taskforce.toml",
            format!("model = \"nope/m\"\n{providers}"),
            "model",
        ),
        (
            "taskforce.toml",
            format!("small_model = \"nope/m\"\n{providers}"),
            "small_model",
        ),
        (
            "taskforce.toml",
            format!("{providers}[agent.build]\nmodel = \"nope/m\"\n"),
            "agent.build.model",
        ),
        (
            "taskforce.toml",
            format!("{providers}[command.c]\ntemplate = \"x\"\nmodel = \"nope/m\"\n"),
            "command.c.model",
        ),
    ];
    for (file, text, key) in cases {
        let p = Project::with(file, &text);
        assert_eq!(
            p.error(),
            format!(
                "{file}: key `{key}`: model \"nope/m\" needs provider \"nope\", which is unknown; configure [provider.nope] with type and base_url (known providers: fake, openai, anthropic, openrouter, groq, deepseek, mistral, ollama, lmstudio, scripted)"
            )
        );
    }
    let p = Project::with("taskforce.toml", providers);
    p.file(".taskforce/agent/a.md", "---\nmodel: nope/m\n---\nbody\n");
    let err = p.error();
    assert!(
        err.starts_with(
            ".taskforce/agent/a.md: key `model`: model \"nope/m\" needs provider \"nope\""
        ),
        "{err}"
    );
}

#[test]
fn configured_and_built_in_providers_serve_models() {
    let p = Project::with(
        "taskforce.toml",
        "model = \"fake/m\"\nsmall_model = \"scripted/echo\"\n[provider.fake]\ntype = \"openai\"\n",
    );
    assert!(p.load().is_ok());
}

#[test]
fn environment_variables_matching_no_key_are_warned_about_by_name() {
    let mut p = Project::new();
    for (name, value) in [
        ("TASKFORCE_MODLE", "scripted/x"),
        ("TASKFORCE_SUBAGENT__MAX_CONCURENT", "3"),
        ("TASKFORCE_SUBAGENT__MAX_DEPTH", "2"),
        ("TASKFORCE_CONFIG", ""),
        ("TASKFORCE_SERVER_PASSWORD", "secret"),
    ] {
        p.env.insert(name.into(), value.into());
    }
    let loaded = p.load().unwrap();
    assert_eq!(loaded.config.subagent.max_depth, 2);
    assert_eq!(
        loaded.warnings,
        [
            "environment variable TASKFORCE_MODLE matches no configuration key and is ignored; did you mean TASKFORCE_MODEL?",
            "environment variable TASKFORCE_SUBAGENT__MAX_CONCURENT matches no configuration key and is ignored (unknown key \"max_concurent\" in [subagent]; did you mean \"max_concurrent\"?)",
        ]
    );
}

#[test]
fn a_model_from_the_environment_needs_its_provider_too() {
    let mut p = Project::new();
    p.env.insert("TASKFORCE_MODEL".into(), "nope/m".into());
    let err = p.error();
    assert!(
        err.starts_with("environment variable TASKFORCE_MODEL: key `model`"),
        "{err}"
    );
}

#[test]
fn keybinds_take_opencodes_action_names_and_name_a_slip() {
    let ok = Project::with(
        "taskforce.toml",
        "[keybinds]\nsession_parent = \"<leader>k\"\ntheme_list = \"none\"\nsession_tree = \"<leader>t\"\n",
    );
    let loaded = ok.load().unwrap();
    assert_eq!(loaded.config.keybinds["session_parent"], "<leader>k");
    let slip = Project::with(
        "taskforce.toml",
        "[keybinds]\nsession_parnt = \"<leader>k\"\n",
    );
    let error = slip.error();
    assert!(
        error.contains("keybinds.session_parnt")
            && error.contains("did you mean \"session_parent\"?"),
        "{error}"
    );
    let empty = Project::with("taskforce.toml", "[keybinds]\nsession_parent = \"\"\n");
    assert!(
        empty.error().contains("must name a key"),
        "{}",
        empty.error()
    );
}

#[test]
fn an_opencode_mcp_section_loads_as_written() {
    let p = Project::with(
        "taskforce.json",
        r#"{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "my-local": {
      "type": "local",
      "command": ["npx", "-y", "@acme/mcp-server"],
      "environment": {"ACME_TOKEN": "tok-12345", "Mode": "fast"},
      "enabled": true,
      "timeout": 10000
    },
    "remote.docs": {
      "type": "remote",
      "url": "https://mcp.example.com/mcp",
      "headers": {"Authorization": "Bearer abcdef"},
      "oauth": false
    },
    "off": {"enabled": false}
  }
}"#,
    );
    let config = p.load().unwrap().config;
    let local = &config.mcp["my-local"];
    assert_eq!(local.kind, Some(super::McpKind::Local));
    assert_eq!(local.command, ["npx", "-y", "@acme/mcp-server"]);
    assert_eq!(local.environment["ACME_TOKEN"], "tok-12345");
    assert_eq!(local.environment["Mode"], "fast");
    assert_eq!(local.timeout, Some(10_000));
    let remote = &config.mcp["remote.docs"];
    assert_eq!(remote.headers["Authorization"], "Bearer abcdef");
    assert!(remote.is_enabled());
    assert!(!config.mcp["off"].is_enabled());
    let shown = config.redacted();
    assert_eq!(
        shown.mcp["remote.docs"].headers["Authorization"],
        "[redacted]"
    );
    assert_eq!(
        shown.mcp["my-local"].environment["ACME_TOKEN"],
        "[redacted]"
    );
}

#[test]
fn a_project_may_switch_off_a_server_the_global_file_configures() {
    let p = Project::new();
    let home = PathBuf::from(&p.env["HOME"]);
    let global = home.join(".config/taskforce/config.toml");
    std::fs::create_dir_all(global.parent().unwrap()).unwrap();
    std::fs::write(
        &global,
        "[mcp.search]\ntype = \"local\"\ncommand = [\"search-mcp\"]\n",
    )
    .unwrap();
    assert!(p.load().unwrap().config.mcp["search"].is_enabled());
    p.file("taskforce.toml", "[mcp.search]\nenabled = false\n");
    let config = p.load().unwrap().config;
    let search = &config.mcp["search"];
    assert!(!search.is_enabled());
    assert_eq!(search.command, ["search-mcp"]);
}

#[test]
fn a_wrong_mcp_server_is_named_by_its_key() {
    let cases = [
        ("[mcp.a]\ntype = \"local\"\n", "key `mcp.a.command`"),
        ("[mcp.a]\ncommand = [\"x\"]\n", "key `mcp.a.type`: missing"),
        ("[mcp.a]\ntype = \"remote\"\n", "key `mcp.a.url`"),
        ("[mcp.a]\ntype = \"ssh\"\n", "mcp.a.type"),
        (
            "[mcp.a]\ntype = \"local\"\ncommand = [\"x\"]\ntimeout = 0\n",
            "mcp.a.timeout",
        ),
    ];
    for (text, expected) in cases {
        let err = Project::with("taskforce.toml", text).error();
        assert!(err.contains(expected), "{text}: {err}");
    }
    let err = Project::with(
        "taskforce.toml",
        "[mcp.a]\ntype = \"local\"\ncomand = [\"x\"]\n",
    )
    .error();
    assert_eq!(
        err,
        unknown("comand", "[mcp.a]", "taskforce.toml", "command")
    );
}

#[test]
fn a_cluster_section_loads_with_durations_and_a_bad_prefix_is_named_by_its_key() {
    let p = Project::with(
        "taskforce.toml",
        "[cluster]\nnats = \"nats://127.0.0.1:4222\"\nprefix = \"team-a\"\nnode = \"n1\"\nheartbeat = \"500ms\"\nlease = \"3s\"\n",
    );
    let cluster = p.load().unwrap().config.cluster;
    assert_eq!(cluster.prefix, "team-a");
    assert_eq!(cluster.lease, std::time::Duration::from_secs(3));
    p.file("taskforce.toml", "[cluster]\nprefix = \"team.a\"\n");
    let error = p.error();
    assert!(
        error.contains("cluster.prefix") && error.contains("team.a"),
        "{error}"
    );
    p.file("taskforce.toml", "[cluster]\nenabled = true\n");
    assert!(p.error().contains("cluster.nats"));
    p.file("taskforce.toml", "[cluster]\nnat = \"nats://x\"\n");
    let error = p.error();
    assert!(
        error.contains("[cluster]") && error.contains("\"nats\""),
        "{error}"
    );
}

#[test]
fn the_store_url_comes_from_a_file_or_the_environment_and_a_bad_one_names_its_key() {
    let p = Project::with(
        "taskforce.toml",
        "[store]\nurl = \"postgres://tf:s3cret@db.example:5432/tf\"\n",
    );
    let config = p.load().unwrap().config;
    assert_eq!(
        config.store.backend(),
        Ok(super::StoreBackend::Postgres(
            "postgres://tf:s3cret@db.example:5432/tf".into()
        ))
    );
    let shown = serde_json::to_string(&config.redacted()).unwrap();
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("db.example:5432/tf"), "{shown}");

    let mut p = Project::new();
    p.env.insert(
        "TASKFORCE_STORE__URL".into(),
        "postgresql://db.example/other".into(),
    );
    assert_eq!(
        p.load().unwrap().config.store.url.as_deref(),
        Some("postgresql://db.example/other")
    );

    let err = Project::with(
        "taskforce.toml",
        "[store]\nurl = \"mysql://tf:s3cret@db.example/tf\"\n",
    )
    .error();
    assert!(err.contains("key `store.url`"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    let err = Project::with("taskforce.toml", "[store]\nurl = \"x\"\npool = 3\n").error();
    assert!(err.contains("unknown key \"pool\" in [store]"), "{err}");
}
