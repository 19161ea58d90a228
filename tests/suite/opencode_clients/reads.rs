//! What OpenCode's TUI relies on when it reads a session: a read of its messages made after an
//! event holds what the event announced. The TUI reads a session's messages when it first
//! shows it and puts what the read answers in place of the parts its events drew.
//!
//! taskforce publishes a running tool call at once but stores it only once it has run for a
//! while (200 ms), so a read right after the call's ask missed the call: in OpenCode a child
//! entered right after its ask showed no call, and the ask showed `$ undefined` as its
//! command. A call now goes to the store before its ask goes out. (Text whose step has not
//! ended is still stored only with the next step, and a call that asks nothing only after
//! 200 ms: a read in between still misses them.)

use reqwest::StatusCode;
use serde_json::json;
use taskforce_testkit::fake_openai::{RecordedRequest, Response};

use crate::suite::server::{Sse, harness};

/// Calls `bash ls`, then answers "done".
fn model(req: &RecordedRequest) -> Response {
    if req.last_role() == Some("tool") {
        return Response::text("done");
    }
    Response::tool_calls(&[(
        "call_ls",
        "bash",
        r#"{"command":"ls","description":"list the files"}"#,
    )])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_after_an_ask_holds_the_tool_call_the_ask_names() {
    let h = harness()
        .config("[permission]\nbash = \"ask\"\n")
        .start(model)
        .await;
    let mut events = Sse::open(&h, "/event", None).await;
    let session = h.session_id().await;
    let started = h
        .post(
            &format!("/session/{session}/prompt_async"),
            json!({"parts": [{"type": "text", "text": "list the files"}]}),
        )
        .await;
    assert_eq!(started.status, StatusCode::NO_CONTENT, "{}", started.body);
    let frames = events.until(|f| f.is("permission.asked", &session)).await;
    let tool = frames.last().unwrap().properties()["tool"].clone();

    let messages = h.messages(&session).await;
    let call = messages
        .iter()
        .filter_map(|m| m["parts"].as_array())
        .flatten()
        .find(|p| p["messageID"] == tool["messageID"] && p["callID"] == tool["callID"]);
    assert!(
        call.is_some_and(|p| p["state"]["input"]["command"] == "ls"),
        "the read misses the call the ask names ({tool}): {messages:#?}"
    );
}
