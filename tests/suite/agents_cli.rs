//! `taskforce agents list|show|create`.

use super::support::Sandbox;

#[test]
fn list_puts_the_default_first_then_reference_order() {
    let s = Sandbox::new();
    let out = s.ok(&["agents", "list"]);
    let names: Vec<&str> = out
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        names,
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
    assert!(out.stdout.lines().nth(1).unwrap().contains("(default)"));
    assert!(out.stdout.contains("title (hidden)"));

    let mut s = Sandbox::new();
    s.env("TASKFORCE_DEFAULT_AGENT", "plan");
    let json = s.ok(&["agents", "list", "--json"]).json();
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[..2], ["plan", "build"]);
}

#[test]
fn list_json_has_opencode_fields_and_disabled_tools() {
    let s = Sandbox::new();
    s.file("taskforce.toml", "[provider.openai]\n");
    s.file(
        ".taskforce/agent/reviewer.md",
        "---\ndescription: Reviews code\nmode: subagent\nmodel: openai/gpt-4o\ntemperature: 0.2\nsteps: 9\npermission:\n  edit: deny\n  bash:\n    \"*\": ask\n    \"git diff *\": allow\n---\nYou review code.\n",
    );
    let json = s.ok(&["agents", "list", "--json"]).json();
    let reviewer = json
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "reviewer")
        .unwrap();
    assert_eq!(reviewer["description"], "Reviews code");
    assert_eq!(reviewer["mode"], "subagent");
    assert_eq!(reviewer["native"], false);
    assert_eq!(reviewer["hidden"], false);
    assert_eq!(
        reviewer["model"],
        serde_json::json!({"providerID": "openai", "modelID": "gpt-4o"})
    );
    assert_eq!(reviewer["temperature"], 0.2);
    assert_eq!(reviewer["steps"], 9);
    assert_eq!(reviewer["prompt"], "You review code.");
    assert_eq!(reviewer["options"], serde_json::json!({}));
    assert_eq!(
        reviewer["disabledTools"],
        serde_json::json!(["write", "edit", "question"])
    );
    let rules = reviewer["permission"].as_array().unwrap();
    let glob = s
        .home
        .join(".local/share/taskforce/tool-output/*")
        .display()
        .to_string();
    let tail: Vec<String> = rules[rules.len() - 4..]
        .iter()
        .map(|r| format!("{} {} {}", r["permission"], r["pattern"], r["action"]))
        .collect();
    assert_eq!(
        tail,
        [
            r#""edit" "*" "deny""#.to_string(),
            r#""bash" "*" "ask""#.to_string(),
            r#""bash" "git diff *" "allow""#.to_string(),
            format!(r#""external_directory" {glob:?} "allow""#),
        ]
    );
}

#[test]
fn show_prints_one_agent_with_rule_origins() {
    let s = Sandbox::new();
    let json = s.ok(&["agents", "show", "explore", "--json"]).json();
    assert_eq!(json["name"], "explore");
    assert_eq!(json["native"], true);
    let text = s.ok(&["agents", "show", "explore"]).stdout;
    assert!(text.contains("mode: subagent (built-in)"), "{text}");
    assert!(
        text.contains("tools hidden from the model: write, edit, todowrite, todoread, task"),
        "{text}"
    );
    assert!(
        text.contains("the built-in definition of this agent"),
        "{text}"
    );
    assert!(
        text.contains("search tools (websearch, codesearch): not offered, as no search backend is configured under [search]"),
        "{text}"
    );
    s.file(
        "taskforce.toml",
        "[search]\nengine = \"searxng\"\nurl = \"http://127.0.0.1:8888\"\n",
    );
    let text = s.ok(&["agents", "show", "explore"]).stdout;
    assert!(
        text.contains(
            "search tools (websearch, codesearch): answered by the searxng backend of [search]"
        ),
        "{text}"
    );
    // An agent whose rules deny them outright has no such line.
    let text = s.ok(&["agents", "show", "title"]).stdout;
    assert!(!text.contains("search tools"), "{text}");
}

#[test]
fn unknown_agent_lists_the_known_ones() {
    let s = Sandbox::new();
    let err = s.usage_error(&["agents", "show", "nope"]);
    assert!(
        err.contains("unknown agent \"nope\"; known agents: build, plan"),
        "{err}"
    );
}

#[test]
fn bad_agent_yaml_names_file_and_line() {
    let s = Sandbox::new();
    s.file(
        ".taskforce/agent/broken.md",
        "---\ndescription: x\nmode: [subagent\n---\nbody\n",
    );
    let err = s.usage_error(&["agents", "list"]);
    assert_eq!(err.lines().count(), 1, "one clear message: {err}");
    assert!(
        err.starts_with("error: .taskforce/agent/broken.md:"),
        "{err}"
    );
    assert!(err.contains("invalid YAML frontmatter"), "{err}");
}

#[test]
fn bad_config_exits_2_naming_file_and_key() {
    let s = Sandbox::new();
    s.file("taskforce.toml", "[agent.reviewer]\nmode = \"sidekick\"\n");
    let err = s.usage_error(&["agents", "list"]);
    assert!(
        err.contains("taskforce.toml: key `agent.reviewer.mode`"),
        "{err}"
    );
    assert!(err.contains("`primary`, `subagent`, `all`"), "{err}");

    let s = Sandbox::new();
    let err = s.usage_error(&["--config", "missing.toml", "agents", "list"]);
    assert!(
        err.contains("missing.toml") && err.contains("--config"),
        "{err}"
    );

    let s = Sandbox::new();
    s.file("taskforce.toml", "[search]\nengine = \"google\"\n");
    let err = s.usage_error(&["agents", "list"]);
    assert!(
        err.contains("taskforce.toml: key `search.engine`: unknown variant `google`, expected `exa` or `searxng`"),
        "{err}"
    );
    let s = Sandbox::new();
    s.file("taskforce.toml", "[search]\nengine = \"searxng\"\n");
    let err = s.usage_error(&["agents", "list"]);
    assert!(err.contains("key `search.url`: missing"), "{err}");

    let s = Sandbox::new();
    s.file("taskforce.toml", "default_agent = \"general\"\n");
    let err = s.usage_error(&["agents", "list"]);
    assert!(
        err.contains("default agent \"general\" is a subagent"),
        "{err}"
    );
}

#[test]
fn bad_usage_exits_2() {
    let s = Sandbox::new();
    s.usage_error(&["agents"]);
    s.usage_error(&["agents", "list", "--nope"]);
    s.usage_error(&["frobnicate"]);
}

#[test]
fn global_flags_config_and_verbose() {
    let s = Sandbox::new();
    let extra = s.file(
        "ci/extra.toml",
        "[agent.extra]\ndescription = \"From --config\"\n",
    );
    let out = s.ok(&[
        "-v",
        "--config",
        extra.to_str().unwrap(),
        "agents",
        "show",
        "extra",
        "--json",
    ]);
    assert_eq!(out.json()["description"], "From --config");
}

#[test]
fn claude_agent_alias_warnings_go_to_stderr() {
    let s = Sandbox::new();
    s.file(
        ".claude/agents/tester.md",
        "---\nname: tester\ndescription: Tests\ntools: Bash, Read\nmodel: haiku\n---\nRun the tests.",
    );
    let out = s.ok(&["agents", "show", "tester", "--json"]);
    assert!(
        out.stderr.contains("warning:") && out.stderr.contains("\"haiku\""),
        "{}",
        out.stderr
    );
    assert_eq!(out.json()["mode"], "subagent");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_writes_the_agent_the_model_designed() {
    use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
    let fake = FakeOpenAi::queue(vec![Response::text(
        r#"{"identifier": "changelog-writer", "whenToUse": "Use this agent when a release needs notes.", "systemPrompt": "You write changelogs."}"#,
    )])
    .await
    .unwrap();
    let sandbox = Sandbox::new();
    sandbox.file(
        "taskforce.toml",
        &format!(
            "model = \"fake/gpt-test\"\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-test\"\n",
            fake.base_url()
        ),
    );
    let out = tokio::task::spawn_blocking(move || {
        let out = sandbox.run(&["agents", "create", "writes", "release", "notes"]);
        (out, sandbox)
    })
    .await
    .unwrap();
    let (out, sandbox) = out;
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("created agent changelog-writer in "),
        "{}",
        out.stdout
    );
    assert!(fake.requests()[0].contains("writes release notes"));
    let shown = sandbox
        .run(&["agents", "show", "changelog-writer", "--json"])
        .json();
    assert_eq!(shown["mode"], "subagent");
    assert_eq!(
        shown["description"],
        "Use this agent when a release needs notes."
    );
    assert_eq!(sandbox.run(&["agents", "create", " "]).status, 2);
}

#[test]
fn show_lists_the_skills_an_agent_may_load() {
    let s = Sandbox::new();
    let text = s.ok(&["agents", "show", "build"]).stdout;
    assert!(text.contains("\nskills: none found\n"), "{text}");
    s.file(
        ".taskforce/skills/release/SKILL.md",
        "---\nname: release\ndescription: Cut a release\n---\nSteps.\n",
    );
    s.home_file(
        ".claude/skills/internal-db/SKILL.md",
        "---\nname: internal-db\ndescription: Poke the database\n---\nSteps.\n",
    );
    let text = s.ok(&["agents", "show", "explore"]).stdout;
    assert!(
        text.contains("\nskills: none (the skill tool is hidden from the model)\n"),
        "{text}"
    );
    assert!(
        text.contains(", skill\n"),
        "the skill tool is among the hidden: {text}"
    );
    s.file(
        "taskforce.toml",
        "[permission.skill]\n\"internal-*\" = \"deny\"\n",
    );
    let text = s.ok(&["agents", "show", "build"]).stdout;
    assert!(
        text.contains("\nskills: release (denied: internal-db)\n"),
        "{text}"
    );
}

#[test]
fn a_broken_skill_is_reported_on_stderr_and_skipped() {
    let s = Sandbox::new();
    let broken = s.file(
        ".claude/skills/broken/SKILL.md",
        "---\ndescription: d\n---\n",
    );
    let out = s.ok(&["agents", "show", "build"]);
    assert!(
        out.stdout.contains("\nskills: none found\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains(&format!(
            "{}: the frontmatter has no `name`; the skill is skipped",
            broken.display()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.matches("skipped").count(), 1, "{}", out.stderr);
}
