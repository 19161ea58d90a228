//! MCP servers through a real runtime: the test kit's fixture server over streamable HTTP and
//! over stdio, a fake model that calls its tools, permission rules on their names, a child
//! session, tool-list changes, failures, and no process left behind.

use std::time::Duration;

use serde_json::json;
use taskforce_actors::mcp::McpStatus;
use taskforce_actors::permission::PermissionReply;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::model::{PartKind, ToolState};
use taskforce_testkit::eventually;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::mcp::HttpFixture;
use taskforce_testkit::runtime::{next_ask, until};
use taskforce_testkit::script::{is_child, task_call};

use super::runtime::{Env, tool_parts};

/// `[mcp.fixture]` pointing at the HTTP fixture, with `extra` lines after it.
fn remote(fixture: &HttpFixture, extra: &str) -> String {
    format!(
        "[mcp.fixture]\ntype = \"remote\"\nurl = \"{}\"\n{extra}",
        fixture.url()
    )
}

/// A model that calls `tool` with `args` until a tool result is in, then answers with the
/// text of the result (or error).
pub(super) fn calls(
    tool: &'static str,
    args: serde_json::Value,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    let args = args.to_string();
    move |req| {
        // A call's files come after its result as a user message of their own: the turn is
        // answered once any tool result is in.
        let result = req.messages().iter().rev().find(|m| m["role"] == "tool");
        match result {
            None => Response::tool_calls(&[("call_mcp", tool, &args)]),
            Some(m) => Response::text(&format!("read: {}", m["content"])),
        }
    }
}

/// Waits until server `name` has `status`.
pub(super) async fn until_status(rt: &Runtime, name: &'static str, status: McpStatus) {
    let what = format!("MCP server {name} to be {status:?}");
    until(rt, &what, move |rt| {
        let status = status.clone();
        async move { rt.mcp().status().get(name) == Some(&status) }
    })
    .await;
}

/// Waits until server `name` failed; answers its error.
pub(super) async fn until_failed(rt: &Runtime, name: &'static str) -> String {
    until(rt, "the MCP server to fail", move |rt| async move {
        matches!(rt.mcp().status().get(name), Some(McpStatus::Failed { .. }))
    })
    .await;
    match rt.mcp().status().get(name) {
        Some(McpStatus::Failed { error }) => error.clone(),
        other => panic!("not failed: {other:?}"),
    }
}

/// Runs one prompt in a new session; answers the session's tool parts and the final text.
pub(super) async fn run(rt: &Runtime, text: &str) -> (Vec<(String, ToolState)>, String) {
    let s = rt.create_session(None, None).await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&s.id, PromptInput::text(text)),
    )
    .await
    .expect("the prompt was answered")
    .unwrap();
    let text = answer
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.clone()))
        .collect();
    (tool_parts(rt, &s.id).await, text)
}

/// The HTTP fixture, a fake model answering with `model`, and a runtime configured with both
/// (and `extra`), its server connected.
struct Served {
    fixture: HttpFixture,
    fake: FakeOpenAi,
    _env: Env,
    rt: Runtime,
}

async fn served<F>(model: F, extra: &str) -> Served
where
    F: Fn(&RecordedRequest) -> Response + Send + Sync + 'static,
{
    let fixture = HttpFixture::start().await.unwrap();
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = Env::new(&fake.base_url(), &remote(&fixture, extra));
    let rt = env.runtime().await;
    until_status(&rt, "fixture", McpStatus::Connected).await;
    Served {
        fixture,
        fake,
        _env: env,
        rt,
    }
}

/// Prompts a new session with `text` in the background.
async fn in_background(
    rt: &Runtime,
    text: &'static str,
) -> (
    taskforce_agents::id::SessionId,
    tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
) {
    let s = rt.create_session(None, None).await.unwrap();
    let (rt, id) = (rt.clone(), s.id.clone());
    let running = tokio::spawn(async move { rt.prompt(&id, PromptInput::text(text)).await });
    (s.id, running)
}

/// Waits for a prompt started by [`in_background`] to be answered.
async fn answered(running: tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>) {
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the prompt was answered")
        .unwrap()
        .unwrap();
}

#[actix_rt::test]
async fn a_remote_servers_tools_are_offered_by_server_and_tool_name_and_called() {
    let Served {
        fixture: _fixture,
        fake,
        rt,
        _env,
    } = served(calls("fixture_echo", json!({"text": "hello mcp"})), "").await;

    let (parts, text) = run(&rt, "echo something").await;
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].0, "fixture_echo");
    let ToolState::Completed(done) = &parts[0].1 else {
        panic!("the call ran: {:?}", parts[0].1)
    };
    assert_eq!(done.output, "hello mcp");
    assert_eq!(text, "read: \"hello mcp\"");

    let first = &fake.requests()[0];
    let names = first.tool_names();
    for name in [
        "bash",
        "fixture_echo",
        "fixture_fail",
        "fixture_slow",
        "fixture_weird_name",
    ] {
        assert!(names.contains(&name), "{name} is offered: {names:?}");
    }
    let echo = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "fixture_echo")
        .unwrap();
    assert_eq!(
        echo["function"]["description"],
        "Answers the text it is given."
    );
    assert_eq!(
        echo["function"]["parameters"],
        json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to answer"}},
            "required": ["text"],
            "additionalProperties": false
        })
    );
    rt.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn a_result_flagged_as_an_error_is_a_failed_call_the_model_reads() {
    let Served {
        fixture: _fixture,
        fake: _fake,
        rt,
        _env,
    } = served(calls("fixture_fail", json!({"message": "no such row"})), "").await;
    let (parts, text) = run(&rt, "fail please").await;
    let ToolState::Error(failed) = &parts[0].1 else {
        panic!("the call failed: {:?}", parts[0].1)
    };
    assert_eq!(failed.error, "no such row");
    assert_eq!(text, "read: \"no such row\"");
}

#[actix_rt::test]
async fn images_and_resources_become_the_calls_attachments_and_text() {
    let Served {
        fixture: _fixture,
        fake: _fake,
        rt,
        _env,
    } = served(calls("fixture_media", json!({})), "").await;
    let (parts, _) = run(&rt, "show me").await;
    let ToolState::Completed(done) = &parts[0].1 else {
        panic!("the call ran: {:?}", parts[0].1)
    };
    assert_eq!(done.output, "a picture\n\nresource text");
    let files: Vec<_> = done
        .attachments
        .as_ref()
        .expect("attachments")
        .iter()
        .map(|p| match &p.kind {
            PartKind::File(f) => (f.mime.clone(), f.filename.clone(), f.url.clone()),
            other => panic!("not a file: {other:?}"),
        })
        .collect();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].0, "image/png");
    assert!(
        files[0].2.starts_with("data:image/png;base64,iVBOR"),
        "{}",
        files[0].2
    );
    assert_eq!(files[1].1.as_deref(), Some("file:///pixel.png"));
}

#[actix_rt::test]
async fn a_call_past_the_timeout_fails_and_is_cancelled_on_the_server() {
    let extra = "[experimental]\nmcp_timeout = 300\n";
    let Served {
        fixture,
        fake: _fake,
        rt,
        _env,
    } = served(calls("fixture_slow", json!({"ms": 30_000})), extra).await;
    let (parts, _) = run(&rt, "wait").await;
    let ToolState::Error(failed) = &parts[0].1 else {
        panic!("the call failed: {:?}", parts[0].1)
    };
    assert!(
        failed.error.contains("Request timed out"),
        "{}",
        failed.error
    );
    assert!(failed.error.contains("300 ms"), "{}", failed.error);
    let server = fixture.fixture.clone();
    eventually("the server to hear of the cancel", || {
        server.cancelled() == 1
    })
    .await;
}

#[actix_rt::test]
async fn cancelling_the_session_cancels_the_call_on_the_server() {
    let Served {
        fixture,
        fake: _fake,
        rt,
        _env,
    } = served(calls("fixture_slow", json!({"ms": 60_000})), "").await;
    let (id, running) = in_background(&rt, "wait").await;
    let session = id.clone();
    until(&rt, "the call to run", move |rt| {
        let id = session.clone();
        async move {
            tool_parts(&rt, &id)
                .await
                .iter()
                .any(|(_, s)| matches!(s, ToolState::Running(_)))
        }
    })
    .await;
    rt.cancel(&id).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), running).await;
    let server = fixture.fixture.clone();
    eventually("the server to hear of the cancel", || {
        server.cancelled() == 1
    })
    .await;
    let parts = tool_parts(&rt, &id).await;
    let ToolState::Error(failed) = &parts[0].1 else {
        panic!("the call was aborted: {:?}", parts[0].1)
    };
    assert_eq!(failed.error, "Tool execution aborted");
}

#[actix_rt::test]
async fn an_ask_rule_on_the_server_prefix_asks_before_each_call() {
    let extra = "[permission]\n\"fixture_*\" = \"ask\"\n";
    let Served {
        fixture: _fixture,
        fake: _fake,
        rt,
        _env,
    } = served(calls("fixture_echo", json!({"text": "asked"})), extra).await;
    let mut events = rt.subscribe(taskforce_actors::bus::Filter::All);
    let (id, running) = in_background(&rt, "echo").await;
    let ask = next_ask(&mut events).await;
    assert_eq!(ask.permission, "fixture_echo");
    assert_eq!(ask.patterns, ["*"]);
    assert_eq!(ask.always, ["*"]);
    assert!(
        rt.reply_permission(&ask.id, PermissionReply::Once, None)
            .await
    );
    answered(running).await;
    let parts = tool_parts(&rt, &id).await;
    assert!(matches!(&parts[0].1, ToolState::Completed(c) if c.output == "asked"));
}

/// A model whose root delegates to `general`, whose child calls `fixture_echo`.
fn delegating_to_echo(req: &RecordedRequest) -> Response {
    let args = json!({"description": "echo", "prompt": "echo it", "subagent_type": "general"});
    match (is_child(req), req.last_role()) {
        (false, Some("user")) => task_call(&args.to_string()),
        (true, Some("user")) if req.tool_names().contains(&"fixture_echo") => {
            Response::tool_calls(&[("call_echo", "fixture_echo", r#"{"text":"from the child"}"#)])
        }
        (true, Some("user")) => Response::text("no fixture tools here"),
        (true, _) => Response::text("child done"),
        (false, _) => Response::text("parent done"),
    }
}

#[actix_rt::test]
async fn a_child_calls_the_tools_under_the_same_rules_asked_in_its_own_session() {
    let extra = "[permission]\n\"fixture_*\" = \"ask\"\n";
    let Served {
        fixture: _fixture,
        fake: _fake,
        rt,
        _env,
    } = served(delegating_to_echo, extra).await;
    let mut events = rt.subscribe(taskforce_actors::bus::Filter::All);
    let (id, running) = in_background(&rt, "delegate").await;
    let ask = next_ask(&mut events).await;
    assert_eq!(ask.permission, "fixture_echo");
    assert_ne!(ask.session_id, id, "the child asks");
    assert_eq!(ask.root_session_id, id);
    assert!(
        rt.reply_permission(&ask.id, PermissionReply::Once, None)
            .await
    );
    answered(running).await;
    let child = rt.children(&id).await.unwrap().remove(0);
    let parts = tool_parts(&rt, &child.id).await;
    assert!(
        matches!(&parts[0].1, ToolState::Completed(c) if c.output == "from the child"),
        "{parts:?}"
    );
}

#[actix_rt::test]
async fn a_child_is_not_offered_tools_its_caller_may_not_use() {
    let extra = "[agent.build.permission]\n\"fixture_*\" = \"deny\"\n";
    let Served {
        fixture: _fixture,
        fake,
        rt,
        _env,
    } = served(delegating_to_echo, extra).await;
    run(&rt, "delegate").await;
    let requests = fake.requests();
    let child = requests
        .iter()
        .find(|r| is_child(r))
        .expect("the child ran");
    assert!(
        !child.tool_names().iter().any(|n| n.starts_with("fixture_")),
        "{:?}",
        child.tool_names()
    );
    let root = &requests[0];
    assert!(!root.tool_names().iter().any(|n| n.starts_with("fixture_")));
    assert!(child.tool_names().contains(&"read"));
}

#[actix_rt::test]
async fn a_changed_tool_list_is_offered_from_the_next_step_on() {
    let Served {
        fixture: _fixture,
        fake,
        rt,
        _env,
    } = served(calls("fixture_add_tool", json!({})), "").await;
    let mut events = rt.subscribe(taskforce_actors::bus::Filter::All);
    run(&rt, "add a tool").await;
    taskforce_testkit::until_event(
        "mcp.tools.changed",
        futures::StreamExt::map(&mut events, |_| ()),
        || std::future::ready(rt.mcp().tools().iter().any(|t| t.id() == "fixture_extra")),
    )
    .await;
    run(&rt, "again").await;
    let last = fake.requests().last().cloned().unwrap();
    assert!(
        last.tool_names().contains(&"fixture_extra"),
        "{:?}",
        last.tool_names()
    );
}

#[actix_rt::test]
async fn servers_connect_disconnect_and_are_added_at_run_time() {
    let fixture = HttpFixture::start().await.unwrap();
    let fake = FakeOpenAi::start(|_: &RecordedRequest| Response::text("hi"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), &remote(&fixture, "enabled = false\n"));
    let rt = env.runtime().await;
    assert_eq!(rt.mcp().status()["fixture"], McpStatus::Disabled);
    assert!(rt.mcp().tools().is_empty());

    rt.mcp().connect("fixture").await.unwrap();
    assert_eq!(rt.mcp().status()["fixture"], McpStatus::Connected);
    assert!(rt.mcp().tools().iter().any(|t| t.id() == "fixture_echo"));
    rt.mcp().disconnect("fixture").await.unwrap();
    assert_eq!(rt.mcp().status()["fixture"], McpStatus::Disabled);
    assert!(rt.mcp().tools().is_empty());

    let config: taskforce_agents::config::McpConfig = serde_json::from_value(json!({
        "type": "remote", "url": fixture.url()
    }))
    .unwrap();
    rt.mcp().add("second", config).await.unwrap();
    assert_eq!(rt.mcp().status()["second"], McpStatus::Connected);
    assert!(rt.mcp().tools().iter().any(|t| t.id() == "second_echo"));
    let bad = taskforce_agents::config::McpConfig::default();
    let err = rt.mcp().add("third", bad).await.unwrap_err().to_string();
    assert!(err.contains("mcp.third.type"), "{err}");
    assert!(rt.mcp().connect("nope").await.is_err());
}
