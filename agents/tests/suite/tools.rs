//! The built-in tools on a real project on disk, through `run_tool` and a `ToolContext` whose
//! host answers permission asks from a fixed ruleset and records them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use taskforce_agents::agent::Registry;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{ModelRef, Todo, ToolStatus};
use taskforce_agents::permission::{self, Action, PermissionAsk, PermissionError, Rule, Ruleset};
use taskforce_agents::tool::{
    self, BUILTIN_TOOLS, Delegate, SubagentOutcome, SubagentRequest, ToolContext, ToolError,
    ToolHost, ToolOutput, builtin_tools, resolve_tool_name, run_tool,
};
use tokio_util::sync::CancellationToken;

use super::fixture::Fixture;

/// A recorded `set_metadata` call.
type MetadataCall = (Option<String>, Map<String, Value>);

/// A host that answers asks from `rules` (allow → Ok, deny → Denied, ask → Rejected).
#[derive(Default)]
struct Host {
    rules: Ruleset,
    asks: Mutex<Vec<PermissionAsk>>,
    metadata: Mutex<Vec<MetadataCall>>,
    todos: Mutex<Vec<Todo>>,
}

#[async_trait]
impl ToolHost for Host {
    async fn ask(&self, _ctx: &ToolContext, ask: PermissionAsk) -> Result<(), PermissionError> {
        self.asks.lock().unwrap().push(ask.clone());
        match permission::decide(&ask, &[&self.rules]) {
            permission::AskDecision::Allow => Ok(()),
            permission::AskDecision::Deny(rules) => Err(PermissionError::Denied { rules }),
            permission::AskDecision::Ask => Err(PermissionError::Rejected),
        }
    }

    fn check(&self, _ctx: &ToolContext, ask: &PermissionAsk) -> permission::AskDecision {
        permission::decide(ask, &[&self.rules])
    }

    fn set_metadata(
        &self,
        _ctx: &ToolContext,
        title: Option<String>,
        metadata: Map<String, Value>,
    ) {
        self.metadata.lock().unwrap().push((title, metadata));
    }

    async fn todos(&self, _session: &SessionId) -> Result<Vec<Todo>, ToolError> {
        Ok(self.todos.lock().unwrap().clone())
    }

    async fn set_todos(&self, _session: &SessionId, todos: Vec<Todo>) -> Result<(), ToolError> {
        *self.todos.lock().unwrap() = todos;
        Ok(())
    }
}

/// A delegate that records requests and answers with a fixed text and child session.
struct Recorder {
    requests: Mutex<Vec<SubagentRequest>>,
    child: SessionId,
}

#[async_trait]
impl Delegate for Recorder {
    async fn run_subagent(
        &self,
        _ctx: &ToolContext,
        request: SubagentRequest,
    ) -> Result<SubagentOutcome, ToolError> {
        let model = request.model.clone();
        self.requests.lock().unwrap().push(request);
        let mut outcome =
            SubagentOutcome::completed(self.child.clone(), "All done: 3 files found.", model);
        outcome.summary = vec![
            serde_json::from_value(
                json!({"id": "prt_1", "tool": "grep", "state": {"status": "completed", "title": "x"}}),
            )
            .unwrap(),
        ];
        Ok(outcome)
    }
}

/// A project on disk, its registry, a host and a delegate.
struct Env {
    fixture: Fixture,
    registry: Arc<Registry>,
    data_dir: PathBuf,
    host: Arc<Host>,
    delegate: Arc<Recorder>,
}

impl Env {
    /// A project whose host allows everything.
    fn new() -> Env {
        Env::with("", vec![Rule::new("*", "*", Action::Allow)])
    }

    /// A project with `config` as its taskforce.toml and a host answering from `rules`.
    fn with(config: &str, rules: Ruleset) -> Env {
        let fixture = Fixture::new();
        fixture.project_file("taskforce.toml", config);
        let loaded = fixture.load();
        let registry = Arc::new(Registry::new(&loaded.config, &loaded.paths).unwrap());
        Env {
            fixture,
            registry,
            data_dir: loaded.paths.data_dir,
            host: Arc::new(Host {
                rules,
                ..Host::default()
            }),
            delegate: Arc::new(Recorder {
                requests: Mutex::new(Vec::new()),
                child: SessionId::new(),
            }),
        }
    }

    /// A project whose host answers with the rules of the built-in `agent`.
    fn with_agent_rules(agent: &str) -> Env {
        let env = Env::new();
        let rules = env.registry.get(agent).unwrap().permission.clone();
        Env {
            host: Arc::new(Host {
                rules,
                ..Host::default()
            }),
            ..env
        }
    }

    fn root(&self) -> &Path {
        &self.fixture.project
    }

    fn file(&self, rel: &str, text: &str) -> PathBuf {
        self.fixture.project_file(rel, text)
    }

    fn ctx_for(&self, agent: &str) -> ToolContext {
        ToolContext {
            session_id: SessionId::new(),
            message_id: MessageId::new(),
            call_id: "call_test".into(),
            agent: Arc::new(self.registry.get(agent).unwrap().clone()),
            model: ModelRef::new("caller", "caller-model"),
            directory: self.root().to_path_buf(),
            project_root: self.root().to_path_buf(),
            data_dir: self.data_dir.clone(),
            home: None,
            abort: CancellationToken::new(),
            bypass_agent_check: false,
            subtask_model: None,
            registry: self.registry.clone(),
            host: self.host.clone(),
            delegate: Some(self.delegate.clone()),
        }
    }

    fn ctx(&self) -> ToolContext {
        self.ctx_for("build")
    }

    fn asks(&self) -> Vec<PermissionAsk> {
        self.host.asks.lock().unwrap().clone()
    }

    fn requests(&self) -> Vec<SubagentRequest> {
        self.delegate.requests.lock().unwrap().clone()
    }

    async fn run(&self, id: &str, args: Value) -> Result<ToolOutput, ToolError> {
        run_tool(tool::tool(id).unwrap().as_ref(), args, &self.ctx()).await
    }
}

fn err_text(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Ok(out) => panic!("expected an error, got {:?}", out.output),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------- registry and arguments

#[test]
fn builtin_tools_and_name_resolution() {
    let tools = builtin_tools();
    let ids: Vec<&str> = tools.iter().map(|t| t.id()).collect();
    let unconfigured = BUILTIN_TOOLS
        .iter()
        .filter(|id| !tool::SEARCH_TOOLS.contains(id));
    assert!(ids.iter().eq(unconfigured), "{ids:?}");
    assert_eq!(resolve_tool_name("Bash", ids.iter().copied()), Some("bash"));
    assert_eq!(
        resolve_tool_name("todowrite", ids.iter().copied()),
        Some("todowrite")
    );
    assert_eq!(resolve_tool_name("apply_patch", ids.iter().copied()), None);
}

#[tokio::test]
async fn invalid_arguments_get_the_schema_message() {
    let env = Env::new();
    let read = tool::tool("read").unwrap();
    let err = run_tool(read.as_ref(), "{\"offset\": 1}", &env.ctx())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "The read tool was called with invalid arguments: missing field `filePath`.\nPlease rewrite the input so it satisfies the expected schema."
    );
    let err = run_tool(read.as_ref(), "not json", &env.ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments { ref tool, .. } if tool == "read"),
        "{err}"
    );
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "a", "oldString": 1, "newString": "b"}),
        )
        .await,
    );
    assert!(
        err.starts_with("The edit tool was called with invalid arguments: oldString: invalid type"),
        "{err}"
    );
    // No permission was asked for any of them.
    assert!(env.asks().is_empty());
}

// ---------------------------------------------------------------- read

#[tokio::test]
async fn read_numbers_lines_with_offset_and_limit() {
    let env = Env::new();
    let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    let path = env.file("src/big.txt", &text);
    let out = env
        .run("read", json!({"filePath": "src/big.txt"}))
        .await
        .unwrap();
    assert!(
        out.output
            .starts_with("<file>\n00001| line 1\n00002| line 2\n"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .ends_with("00050| line 50\n\n(End of file - total 50 lines)\n</file>")
    );
    assert_eq!(out.title, "src/big.txt");

    let out = env
        .run(
            "read",
            json!({"filePath": path.display().to_string(), "offset": 10, "limit": 5}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.output,
        "<file>\n00011| line 11\n00012| line 12\n00013| line 13\n00014| line 14\n00015| line 15\n\n(File has more lines. Use 'offset' parameter to read beyond line 15)\n</file>"
    );
    assert_eq!(out.metadata["truncated"], true);
    assert!(out.metadata.get("outputPath").is_none());
}

#[tokio::test]
async fn read_refuses_binary_missing_and_directories() {
    let env = Env::new();
    std::fs::write(env.root().join("blob"), [0x7f, b'E', b'L', b'F', 0, 0, 1]).unwrap();
    let err = err_text(env.run("read", json!({"filePath": "blob"})).await);
    assert!(err.starts_with("Cannot read binary file: "), "{err}");
    let err = err_text(env.run("read", json!({"filePath": "nope.txt"})).await);
    assert_eq!(
        err,
        format!("File not found: {}", env.root().join("nope.txt").display())
    );
    std::fs::create_dir(env.root().join("dir")).unwrap();
    let err = err_text(env.run("read", json!({"filePath": "dir"})).await);
    assert!(err.starts_with("Path is a directory, not a file:"), "{err}");
}

#[tokio::test]
async fn read_asks_with_the_absolute_path() {
    let env = Env::new();
    let path = env.file("a.txt", "x\n");
    env.run("read", json!({"filePath": "./a.txt"}))
        .await
        .unwrap();
    let asks = env.asks();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].permission, "read");
    assert_eq!(asks[0].patterns, vec![path.display().to_string()]);
    assert_eq!(asks[0].always, vec!["*"]);
}

#[tokio::test]
async fn read_of_env_files_follows_the_agent_rules() {
    let env = Env::with_agent_rules("build");
    env.file(".env", "SECRET=1\n");
    env.file(".env.example", "SECRET=\n");
    let err = env
        .run("read", json!({"filePath": ".env"}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Permission(PermissionError::Rejected));
    env.run("read", json!({"filePath": ".env.example"}))
        .await
        .unwrap();
}

// ---------------------------------------------------------------- write and edit

#[tokio::test]
async fn write_then_edit() {
    let env = Env::new();
    let out = env
        .run(
            "write",
            json!({"filePath": "src/lib.rs", "content": "let a = 1;\nlet b = 1;\n"}),
        )
        .await
        .unwrap();
    assert_eq!(out.output, "Wrote file successfully.");
    let path = env.root().join("src/lib.rs");
    let read = || std::fs::read_to_string(&path).unwrap();

    // One occurrence.
    env.run(
        "edit",
        json!({"filePath": "src/lib.rs", "oldString": "let a", "newString": "let x"}),
    )
    .await
    .unwrap();
    assert_eq!(read(), "let x = 1;\nlet b = 1;\n");

    // Several occurrences without replaceAll: nothing changes.
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "= 1", "newString": "= 2"}),
        )
        .await,
    );
    assert!(err.starts_with("Found 2 matches for oldString"), "{err}");
    assert!(
        err.contains("more surrounding lines") && err.contains("replaceAll"),
        "{err}"
    );
    assert_eq!(read(), "let x = 1;\nlet b = 1;\n");

    // replaceAll.
    let out = env
        .run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "= 1", "newString": "= 2", "replaceAll": true}),
        )
        .await
        .unwrap();
    assert_eq!(read(), "let x = 2;\nlet b = 2;\n");
    assert_eq!(out.metadata["filediff"]["additions"], 2);
    assert_eq!(out.metadata["filediff"]["deletions"], 2);

    // Not found.
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "let z", "newString": "y"}),
        )
        .await,
    );
    assert!(
        err.starts_with("oldString not found in src/lib.rs"),
        "{err}"
    );

    // Same strings.
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "x", "newString": "x"}),
        )
        .await,
    );
    assert_eq!(err, "oldString and newString must be different");

    // Empty oldString creates a missing file.
    env.run(
        "edit",
        json!({"filePath": "docs/new.md", "oldString": "", "newString": "# New\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(env.root().join("docs/new.md")).unwrap(),
        "# New\n"
    );

    // Every change asked `edit` with the path relative to the project.
    let patterns: Vec<String> = env
        .asks()
        .into_iter()
        .filter(|a| a.permission == "edit")
        .map(|a| {
            assert_eq!(a.always, vec!["*"]);
            a.patterns.join(",")
        })
        .collect();
    assert_eq!(
        patterns,
        vec!["src/lib.rs", "src/lib.rs", "src/lib.rs", "docs/new.md"]
    );
}

#[tokio::test]
async fn edit_permission_uses_the_project_relative_path_from_a_subdirectory() {
    let env = Env::with(
        "",
        vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("edit", "src/*", Action::Deny),
        ],
    );
    env.file("src/a.rs", "a\n");
    let mut ctx = env.ctx();
    ctx.directory = env.root().join("src");
    let edit = tool::tool("edit").unwrap();
    let err = run_tool(
        edit.as_ref(),
        json!({"filePath": "a.rs", "oldString": "a", "newString": "b"}),
        &ctx,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ToolError::Permission(PermissionError::Denied { .. })),
        "{err}"
    );
    assert_eq!(env.asks()[0].patterns, vec!["src/a.rs"]);
    assert_eq!(
        std::fs::read_to_string(env.root().join("src/a.rs")).unwrap(),
        "a\n"
    );
}

// ---------------------------------------------------------------- external directories

#[tokio::test]
async fn outside_paths_ask_external_directory_first() {
    let env = Env::with_agent_rules("build");
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("notes.txt");
    std::fs::write(&file, "hi\n").unwrap();
    let err = env
        .run("read", json!({"filePath": file.display().to_string()}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Permission(PermissionError::Rejected));
    let asks = env.asks();
    assert_eq!(asks.len(), 1, "read itself is not asked after the refusal");
    assert_eq!(asks[0].permission, "external_directory");
    let glob = format!("{}/*", outside.path().display());
    assert_eq!(asks[0].patterns, vec![glob.clone()]);
    assert_eq!(asks[0].always, vec![glob]);

    // A relative path escaping the project is outside too.
    let err = env
        .run(
            "write",
            json!({"filePath": "../escape.txt", "content": "x"}),
        )
        .await;
    assert!(err.is_err());
    assert!(!env.root().join("../escape.txt").exists());
    let last = env.asks().pop().unwrap();
    assert_eq!(last.permission, "external_directory");
    assert_eq!(
        last.patterns,
        vec![format!("{}/*", env.root().parent().unwrap().display())]
    );

    // Directory tools ask about the directory itself.
    env.run(
        "list",
        json!({"path": outside.path().display().to_string()}),
    )
    .await
    .unwrap_err();
    let last = env.asks().pop().unwrap();
    assert_eq!(
        last.patterns,
        vec![format!("{}/*", outside.path().display())]
    );
}

#[tokio::test]
async fn saved_tool_output_stays_readable_under_default_rules() {
    let env = Env::with_agent_rules("build");
    let saved = env.data_dir.join("tool-output/tool_test");
    std::fs::create_dir_all(saved.parent().unwrap()).unwrap();
    std::fs::write(&saved, "saved\n").unwrap();
    let out = env
        .run("read", json!({"filePath": saved.display().to_string()}))
        .await
        .unwrap();
    assert!(out.output.contains("00001| saved"));
    let asks = env.asks();
    assert_eq!(asks[0].permission, "external_directory");
    assert_eq!(asks[1].permission, "read");
}

// ---------------------------------------------------------------- list, glob, grep

fn gitignored_project(env: &Env) {
    env.file(".gitignore", "ignored/\n*.tmp\n");
    env.file("src/main.rs", "fn main() { println!(\"needle\"); }\n");
    env.file("src/util.rs", "pub fn helper() {} // needle\n");
    env.file("README.md", "needle in readme\n");
    env.file("ignored/secret.rs", "needle\n");
    env.file("scratch.tmp", "needle\n");
    env.file("node_modules/pkg/index.js", "needle\n");
}

#[tokio::test]
async fn list_respects_gitignore_and_skips_junk() {
    let env = Env::new();
    gitignored_project(&env);
    let out = env.run("list", json!({})).await.unwrap();
    assert_eq!(
        out.output,
        format!(
            "{}/\n  src/\n    main.rs\n    util.rs\n  .gitignore\n  README.md\n  taskforce.toml\n",
            env.root().display()
        )
    );
    let asks = env.asks();
    assert_eq!(asks[0].permission, "list");
    assert_eq!(asks[0].patterns, vec![env.root().display().to_string()]);
}

#[tokio::test]
async fn glob_respects_gitignore() {
    let env = Env::new();
    gitignored_project(&env);
    let out = env
        .run("glob", json!({"pattern": "**/*.rs"}))
        .await
        .unwrap();
    let mut lines: Vec<&str> = out.output.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            env.root().join("src/main.rs").display().to_string(),
            env.root().join("src/util.rs").display().to_string(),
        ]
    );
    let out = env.run("glob", json!({"pattern": "*.tmp"})).await.unwrap();
    assert_eq!(out.output, "No files found");
    let asks = env.asks();
    assert_eq!(asks[0].permission, "glob");
    assert_eq!(asks[0].patterns, vec!["**/*.rs"]);
}

#[tokio::test]
async fn grep_respects_gitignore_and_include() {
    let env = Env::new();
    gitignored_project(&env);
    let out = env.run("grep", json!({"pattern": "needle"})).await.unwrap();
    // Like ripgrep, grep skips only what .gitignore (and .git) exclude: a node_modules that
    // is not ignored is searched; list is the tool that leaves such folders out.
    assert!(
        out.output.starts_with("Found 4 matches\n"),
        "{}",
        out.output
    );
    for file in [
        "src/main.rs",
        "src/util.rs",
        "README.md",
        "node_modules/pkg/index.js",
    ] {
        assert!(
            out.output
                .contains(&format!("{}:\n  Line 1: ", env.root().join(file).display()))
        );
    }
    for file in ["ignored", "scratch.tmp"] {
        assert!(!out.output.contains(file), "{file}: {}", out.output);
    }
    let out = env
        .run("grep", json!({"pattern": "needle", "include": "*.md"}))
        .await
        .unwrap();
    assert_eq!(
        out.output,
        format!(
            "Found 1 matches\n{}:\n  Line 1: needle in readme",
            env.root().join("README.md").display()
        )
    );
    let asks = env.asks();
    assert_eq!(asks[0].permission, "grep");
    assert_eq!(asks[0].patterns, vec!["needle"]);
}

// ---------------------------------------------------------------- bash

#[tokio::test]
async fn bash_captures_output_and_exit_code_in_the_session_directory() {
    let env = Env::new();
    std::fs::create_dir_all(env.root().join("sub")).unwrap();
    let mut ctx = env.ctx();
    ctx.directory = env.root().join("sub");
    let bash = tool::tool("bash").unwrap();
    let out = run_tool(
        bash.as_ref(),
        json!({"command": "pwd && echo oops >&2"}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(
        out.output,
        format!("{}\noops\n", env.root().join("sub").display())
    );
    assert_eq!(out.metadata["exit"], 0);
    assert_eq!(out.title, "pwd && echo oops >&2");

    let out = run_tool(
        bash.as_ref(),
        json!({"command": "echo partial; exit 7"}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(
        out.output,
        "partial\n\n<bash_metadata>\nexit code: 7\n</bash_metadata>"
    );
    assert_eq!(out.metadata["exit"], 7);
}

#[tokio::test]
async fn bash_asks_with_the_command_and_an_arity_prefix() {
    // No rules: every ask is rejected, so nothing runs; only the asks matter.
    let env = Env::with("", Vec::new());
    for command in [
        "git status --short",
        "npm run build",
        "cargo test -p x",
        "frobnicate -x",
    ] {
        let err = env
            .run("bash", json!({"command": command}))
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::Permission(PermissionError::Rejected));
    }
    let asks = env.asks();
    let got: Vec<(Vec<String>, Vec<String>)> =
        asks.into_iter().map(|a| (a.patterns, a.always)).collect();
    let want = |p: &str, a: &str| (vec![p.to_string()], vec![a.to_string()]);
    assert_eq!(
        got,
        vec![
            want("git status --short", "git status *"),
            want("npm run build", "npm run build *"),
            want("cargo test -p x", "cargo test *"),
            want("frobnicate -x", "frobnicate *"),
        ]
    );
}

#[tokio::test]
async fn bash_denied_commands_do_not_run() {
    let env = Env::with(
        "",
        vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("bash", "rm *", Action::Deny),
        ],
    );
    env.file("keep.txt", "x");
    let err = env
        .run("bash", json!({"command": "echo hi && rm keep.txt"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::Permission(PermissionError::Denied { .. })),
        "{err}"
    );
    assert!(env.root().join("keep.txt").exists());
}

#[tokio::test]
async fn bash_outside_paths_ask_external_directory() {
    let env = Env::new();
    let _ = env
        .run("bash", json!({"command": "rm -f /nonexistent-dir/x.txt"}))
        .await;
    let asks = env.asks();
    assert_eq!(asks[0].permission, "external_directory");
    assert_eq!(asks[0].patterns, vec!["/nonexistent-dir/*"]);
    assert_eq!(asks[1].permission, "bash");
}

#[tokio::test]
async fn bash_timeout_kills_and_reports() {
    let env = Env::new();
    let started = Instant::now();
    let out = env
        .run(
            "bash",
            json!({"command": "echo begun; sleep 20", "timeout": 200}),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.output.starts_with("begun\n"));
    assert!(out
        .output
        .ends_with("<bash_metadata>\nbash tool terminated command after exceeding timeout 200 ms\n</bash_metadata>"));
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_gone(pid: &str) {
    taskforce_testkit::eventually(&format!("process {pid} to end"), || gone(pid)).await;
}

async fn abort_kills(through_run_tool: bool) {
    let env = Env::new();
    let pid_file = env.root().join("pid");
    let ctx = env.ctx();
    let abort = ctx.abort.clone();
    let command = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
    let started = Instant::now();
    let call = async {
        let bash = tool::tool("bash").unwrap();
        if through_run_tool {
            run_tool(bash.as_ref(), json!({"command": command}), &ctx).await
        } else {
            bash.execute(json!({"command": command}), &ctx).await
        }
    };
    let cancel = async {
        taskforce_testkit::eventually("the background pid written", || {
            std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
        })
        .await;
        abort.cancel();
    };
    let (result, ()) = tokio::join!(call, cancel);
    assert_eq!(result.unwrap_err(), ToolError::Aborted);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    // The background process does not survive the abort.
    wait_gone(&pid).await;
}

#[tokio::test]
async fn bash_abort_kills_the_process_group() {
    abort_kills(false).await;
}

#[tokio::test]
async fn run_tool_abort_drops_the_call_and_kills_the_process_group() {
    abort_kills(true).await;
}

// ---------------------------------------------------------------- truncation

#[tokio::test]
async fn long_output_is_truncated_at_2000_lines_with_the_task_hint() {
    let env = Env::new();
    let out = env
        .run("bash", json!({"command": "seq 1 3000"}))
        .await
        .unwrap();
    assert_eq!(out.metadata["truncated"], true);
    let path = PathBuf::from(out.metadata["outputPath"].as_str().unwrap());
    assert!(path.starts_with(env.data_dir.join("tool-output")));
    assert!(
        path.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("tool_")
    );
    let saved = std::fs::read_to_string(&path).unwrap();
    assert_eq!(saved.lines().count(), 3000);
    assert!(out.output.starts_with("1\n2\n"));
    assert!(
        out.output
            .contains("\n2000\n\n...1001 lines truncated...\n\n"),
        "{}",
        &out.output[out.output.len() - 600..]
    );
    assert!(!out.output.contains("\n2001\n"));
    assert!(out.output.ends_with(&format!(
        "The tool call succeeded but the output was truncated. Full output saved to: {}\nUse the Task tool to have explore agent process this file with Grep and Read (with offset/limit). Do NOT read the full file yourself - delegate to save context.",
        path.display()
    )));
}

#[tokio::test]
async fn big_output_is_truncated_at_50_kb_with_the_grep_hint_when_task_is_denied() {
    let env = Env::new();
    // explore denies everything it is not given, task included.
    let ctx = env.ctx_for("explore");
    let bash = tool::tool("bash").unwrap();
    let out = run_tool(
        bash.as_ref(),
        json!({"command": "for i in $(seq 1 1000); do printf '%0100d\\n' $i; done"}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(out.metadata["truncated"], true);
    let path = PathBuf::from(out.metadata["outputPath"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap().len(), 101_000);
    // 506 lines (100 bytes + 505 × 101) fit in 51200 bytes.
    assert!(
        out.output.contains("\n\n...49895 bytes truncated...\n\n"),
        "{}",
        &out.output[out.output.len() - 400..]
    );
    assert!(out.output.ends_with(&format!(
        "Full output saved to: {}\nUse Grep to search the full content or Read with offset/limit to view specific sections.",
        path.display()
    )));
}

#[tokio::test]
async fn short_output_is_marked_not_truncated() {
    let env = Env::new();
    let out = env
        .run("bash", json!({"command": "echo hi"}))
        .await
        .unwrap();
    assert_eq!(out.metadata["truncated"], false);
    assert!(out.metadata.get("outputPath").is_none());
    assert!(!env.data_dir.join("tool-output").exists());
}

// ---------------------------------------------------------------- todos

#[tokio::test]
async fn todowrite_and_todoread_go_through_the_host() {
    let env = Env::new();
    let todos = json!([
        {"content": "Write tests", "status": "in_progress", "priority": "high", "id": "1"},
        {"content": "Ship", "status": "pending", "priority": "low", "id": "2"},
        {"content": "Plan", "status": "completed", "priority": "medium", "id": "3"}
    ]);
    let out = env.run("todowrite", json!({"todos": todos})).await.unwrap();
    assert_eq!(out.title, "2 todos");
    assert_eq!(serde_json::from_str::<Value>(&out.output).unwrap(), todos);
    assert_eq!(env.host.todos.lock().unwrap().len(), 3);
    let out = env.run("todoread", json!({})).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&out.output).unwrap(), todos);
    let asks: Vec<String> = env.asks().into_iter().map(|a| a.permission).collect();
    assert_eq!(asks, vec!["todowrite", "todoread"]);
}

// ---------------------------------------------------------------- task

const AGENTS: &str = r#"
[agent.helper]
mode = "subagent"
hidden = true
description = "Helps quietly."

[agent.bare]
mode = "subagent"

[agent.secret]
mode = "subagent"
description = "Not for build."

[agent.pinned]
mode = "subagent"
description = "Runs on its own model."
model = "special/pinned-model"

[agent.build.permission.task]
secret = "deny"

[provider.special]
type = "openai"
"#;

fn task_env() -> Env {
    Env::with(AGENTS, vec![Rule::new("*", "*", Action::Allow)])
}

#[test]
fn task_description_lists_allowed_subagents_hidden_included() {
    let env = task_env();
    let task = tool::tool("task").unwrap();
    let build = env.registry.get("build").unwrap();
    let text = task.description(build, &env.registry);
    let (_, listing) = text
        .split_once("Available agent types and the tools they have access to:\n")
        .unwrap();
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.strip_prefix("- ").unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["general", "explore", "helper", "bare", "pinned"]
    );
    assert!(listing.contains("- helper: Helps quietly.\n"));
    assert!(
        listing.contains("- bare: This subagent should only be called manually by the user.\n")
    );
    assert!(!listing.contains("secret"));
    assert!(text.contains("in parallel"));
    // Another caller without the deny sees `secret`.
    let plan = env.registry.get("plan").unwrap();
    assert!(
        task.description(plan, &env.registry)
            .contains("- secret: Not for build.")
    );
}

#[tokio::test]
async fn task_runs_the_subagent_and_formats_the_result() {
    let env = task_env();
    let out = env
        .run(
            "task",
            json!({"description": "Find files", "prompt": "Find the config files", "subagent_type": "general", "task_id": "ses_previous", "command": "scan"}),
        )
        .await
        .unwrap();
    let child = env.delegate.child.to_string();
    assert_eq!(
        out.output,
        format!(
            "All done: 3 files found.\n\n<task_metadata>\nsession_id: {child}\n</task_metadata>"
        )
    );
    assert_eq!(out.title, "Find files");
    assert_eq!(out.metadata["sessionId"], child);
    assert_eq!(
        out.metadata["model"],
        json!({"providerID": "caller", "modelID": "caller-model"})
    );
    assert_eq!(out.metadata.to_json()["summary"][0]["tool"], "grep");
    assert_eq!(
        out.metadata.summary().map(|s| s[0].state.status),
        Some(ToolStatus::Completed)
    );
    assert_eq!(out.metadata["truncated"], false);

    let requests = env.requests();
    assert_eq!(
        requests,
        vec![SubagentRequest {
            description: "Find files".into(),
            prompt: "Find the config files".into(),
            agent: "general".into(),
            session_id: Some("ses_previous".into()),
            command: Some("scan".into()),
            model: ModelRef::new("caller", "caller-model"),
            timeout: None,
        }]
    );
    let asks = env.asks();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].permission, "task");
    assert_eq!(asks[0].patterns, vec!["general"]);
    assert_eq!(asks[0].always, vec!["*"]);
    assert_eq!(asks[0].metadata["subagent_type"], "general");
    assert_eq!(asks[0].metadata["description"], "Find files");

    // Live metadata: the title and model before the child ran.
    let live = env.host.metadata.lock().unwrap().clone();
    assert_eq!(live[0].0.as_deref(), Some("Find files"));
    assert_eq!(live[0].1["model"]["modelID"], "caller-model");
    assert!(live[0].1.get("sessionId").is_none());
}

#[tokio::test]
async fn task_uses_the_agents_own_model() {
    let env = task_env();
    let out = env
        .run("task", json!({"description": "d", "prompt": "p", "subagent_type": "pinned", "session_id": "ses_x"}))
        .await
        .unwrap();
    assert_eq!(
        out.metadata["model"],
        json!({"providerID": "special", "modelID": "pinned-model"})
    );
    let metadata = out.metadata.to_json();
    let details = &metadata["details"];
    assert_eq!(details["mode"], "single");
    assert_eq!(details["results"][0]["agent"], "pinned");
    assert_eq!(details["results"][0]["task"], "p");
    assert_eq!(details["results"][0]["exitCode"], 0);
    assert_eq!(details["results"][0]["output"], "All done: 3 files found.");
    let request = env.requests().pop().unwrap();
    assert_eq!(request.model, ModelRef::new("special", "pinned-model"));
    assert_eq!(request.session_id.as_deref(), Some("ses_x"));
}

#[tokio::test]
async fn task_unknown_agent_fails_without_delegating() {
    let env = task_env();
    let err = err_text(
        env.run(
            "task",
            json!({"description": "d", "prompt": "p", "subagent_type": "nobody"}),
        )
        .await,
    );
    assert_eq!(
        err,
        "UNKNOWN_AGENT: Unknown agent type: nobody is not a valid agent type"
    );
    assert!(env.requests().is_empty());
    // The permission check comes first.
    assert_eq!(env.asks()[0].patterns, vec!["nobody"]);
}

#[tokio::test]
async fn task_permission_is_asked_unless_bypassed() {
    let env = Env::with(
        AGENTS,
        vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("task", "general", Action::Deny),
        ],
    );
    let args = json!({"description": "d", "prompt": "p", "subagent_type": "general"});
    let err = env.run("task", args.clone()).await.unwrap_err();
    assert!(
        matches!(
            err.cause(),
            ToolError::Permission(PermissionError::Denied { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().starts_with("PERMISSION_DENIED: "), "{err}");
    assert!(env.requests().is_empty());

    let mut ctx = env.ctx();
    ctx.bypass_agent_check = true;
    let task = tool::tool("task").unwrap();
    run_tool(task.as_ref(), args.clone(), &ctx).await.unwrap();
    assert_eq!(env.asks().len(), 1, "no ask when bypassed");
    assert_eq!(env.requests().len(), 1);

    ctx.delegate = None;
    let err = run_tool(task.as_ref(), args, &ctx).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "SUBAGENTS_DISABLED: subagents are not available here"
    );
}
