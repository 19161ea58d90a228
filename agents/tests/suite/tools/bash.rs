//! The bash tool: output and exit code, the permission ask with its command prefix, denied
//! commands, outside paths, the timeout, and aborting a call kills its process group.

use std::time::{Duration, Instant};

use serde_json::json;
use taskforce_agents::permission::{Action, PermissionError, Rule};
use taskforce_agents::tool::{self, ToolError, run_tool};

use super::Env;

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
