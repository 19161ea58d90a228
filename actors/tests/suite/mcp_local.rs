//! MCP servers that run as local processes over stdio, that fail to start or die, and remote
//! ones reached over the older HTTP+SSE transport, through a real runtime.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use taskforce_actors::mcp::McpStatus;
use taskforce_agents::model::ToolState;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::mcp::{MARKERS_ENV, SseFixture, fixture_command};
use taskforce_testkit::{eventually, eventually_async};

use super::mcp::{calls, run, until_failed, until_status};
use super::runtime::Env;

/// `[mcp.fixture]` running the stdio fixture binary, leaving its marks in `markers`.
fn local(markers: &Path, extra: &str) -> String {
    let command = fixture_command().expect("the fixture binary builds");
    format!(
        "[mcp.fixture]\ntype = \"local\"\ncommand = {}\nenvironment = {{ {MARKERS_ENV} = {:?} }}\n{extra}",
        serde_json::to_string(&command).unwrap(),
        markers.display().to_string()
    )
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
#[cfg(target_os = "linux")]
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// The pid the stdio fixture wrote to `markers`.
#[cfg(target_os = "linux")]
async fn fixture_pid(markers: &Path) -> u32 {
    let file = markers.join("pid");
    eventually("the fixture to write its pid", || file.exists()).await;
    std::fs::read_to_string(&file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn markers() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// A runtime whose `[mcp.fixture]` runs the stdio fixture (its marks in a fresh folder), with
/// a fake model answering with `model`; answers once the server is connected.
struct Local {
    _markers: tempfile::TempDir,
    marks: PathBuf,
    _fake: FakeOpenAi,
    _env: Env,
    rt: taskforce_actors::Runtime,
}

async fn local_runtime<F>(model: F) -> Local
where
    F: Fn(&RecordedRequest) -> Response + Send + Sync + 'static,
{
    let (dir, marks) = markers();
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = Env::new(&fake.base_url(), &local(&marks, ""));
    let rt = env.runtime().await;
    until_status(&rt, "fixture", McpStatus::Connected).await;
    Local {
        _markers: dir,
        marks,
        _fake: fake,
        _env: env,
        rt,
    }
}

#[actix_rt::test]
async fn a_server_that_cannot_start_or_is_slow_blocks_neither_the_start_nor_a_prompt() {
    let fake = FakeOpenAi::start(|_: &RecordedRequest| Response::text("still here"))
        .await
        .unwrap();
    let extra = "[mcp.missing]\ntype = \"local\"\ncommand = [\"/nonexistent/mcp-server\"]\n\n\
                 [mcp.mute]\ntype = \"local\"\ncommand = [\"sleep\", \"30\"]\ntimeout = 2000\n";
    let env = Env::new(&fake.base_url(), extra);
    let rt = env.runtime().await;
    let (_, text) = run(&rt, "hello").await;
    assert_eq!(text, "still here");
    let error = until_failed(&rt, "missing").await;
    assert!(
        error.contains("cannot start `/nonexistent/mcp-server`"),
        "{error}"
    );
    let error = until_failed(&rt, "mute").await;
    assert!(error.contains("no answer within 2000 ms"), "{error}");
}

// Whether the process is gone is read from /proc.
#[cfg(target_os = "linux")]
#[actix_rt::test]
async fn a_local_server_runs_on_stdio_and_stops_with_the_runtime() {
    let local = local_runtime(calls("fixture_echo", json!({"text": "over stdio"}))).await;
    let rt = &local.rt;
    let pid = fixture_pid(&local.marks).await;
    let (parts, _) = run(rt, "echo").await;
    assert!(matches!(&parts[0].1, ToolState::Completed(c) if c.output == "over stdio"));
    assert!(!gone(pid));
    rt.stop(Duration::from_secs(5)).await;
    eventually("the server's process to be gone", || gone(pid)).await;
}

// Whether the process is gone is read from /proc.
#[cfg(target_os = "linux")]
#[actix_rt::test]
async fn a_local_server_is_stopped_when_the_runtime_is_dropped() {
    let local = local_runtime(|_: &RecordedRequest| Response::text("hi")).await;
    let pid = fixture_pid(&local.marks).await;
    drop(local);
    eventually("the server's process to be gone", || gone(pid)).await;
}

#[actix_rt::test]
async fn a_local_server_that_dies_is_reported_and_its_tools_go() {
    let local = local_runtime(calls("fixture_exit", json!({}))).await;
    let rt = &local.rt;
    let (parts, _) = run(rt, "die").await;
    let ToolState::Error(failed) = &parts[0].1 else {
        panic!("the call failed: {:?}", parts[0].1)
    };
    assert!(failed.error.contains("not connected"), "{}", failed.error);
    let error = until_failed(rt, "fixture").await;
    assert!(error.contains("closed the connection"), "{error}");
    let rt2 = rt.clone();
    eventually_async("the tools to go", move || {
        let rt = rt2.clone();
        async move { rt.mcp().tools().is_empty() }
    })
    .await;
}

#[actix_rt::test]
async fn a_remote_server_that_only_speaks_http_and_sse_is_reached_by_the_fallback() {
    let fixture = SseFixture::start().await.unwrap();
    let fake = FakeOpenAi::start(calls("legacy_echo", json!({"text": "over sse"})))
        .await
        .unwrap();
    let config = format!(
        "[mcp.legacy]\ntype = \"remote\"\nurl = \"{}\"\n",
        fixture.url()
    );
    let env = Env::new(&fake.base_url(), &config);
    let rt = env.runtime().await;
    until_status(&rt, "legacy", McpStatus::Connected).await;
    let (parts, _) = run(&rt, "echo").await;
    assert!(
        matches!(&parts[0].1, ToolState::Completed(c) if c.output == "over sse"),
        "{parts:?}"
    );
}

#[actix_rt::test]
async fn a_runtime_told_not_to_starts_no_server_until_one_is_connected() {
    let (_dir, marks) = markers();
    let fake = FakeOpenAi::start(|_: &RecordedRequest| Response::text("hi"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), &local(&marks, ""));
    let mut options = env.options();
    options.mcp = false;
    let rt = taskforce_actors::Runtime::start(options).await.unwrap();
    assert_eq!(rt.mcp().status()["fixture"], McpStatus::Disabled);
    assert!(!marks.join("pid").exists());
    rt.mcp().connect("fixture").await.unwrap();
    assert_eq!(rt.mcp().status()["fixture"], McpStatus::Connected);
    rt.stop(Duration::from_secs(5)).await;
}
