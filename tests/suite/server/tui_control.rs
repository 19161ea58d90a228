//! `/tui/*`: a script drives attached TUIs; each call reaches the event stream as OpenCode's
//! `tui.*` event.

use serde_json::{Value, json};

use super::{Sse, answers, harness};

#[tokio::test(flavor = "multi_thread")]
async fn tui_calls_reach_the_event_stream_as_tui_events() {
    let h = harness().start(answers("unused")).await;
    let session = h.session_id().await;
    let mut events = Sse::open(&h, "/event", None).await;
    assert_eq!(events.next().await.kind(), "server.connected");

    let calls: Vec<(&str, Value, Value)> = vec![
        (
            "/tui/append-prompt",
            json!({"text": "fix it"}),
            json!({"type": "tui.prompt.append", "properties": {"text": "fix it"}}),
        ),
        (
            "/tui/submit-prompt",
            Value::Null,
            json!({"type": "tui.command.execute", "properties": {"command": "prompt.submit"}}),
        ),
        (
            "/tui/clear-prompt",
            Value::Null,
            json!({"type": "tui.command.execute", "properties": {"command": "prompt.clear"}}),
        ),
        (
            "/tui/open-sessions",
            Value::Null,
            json!({"type": "tui.command.execute", "properties": {"command": "session.list"}}),
        ),
        (
            "/tui/execute-command",
            json!({"command": "agent_cycle"}),
            json!({"type": "tui.command.execute", "properties": {"command": "agent.cycle"}}),
        ),
        (
            "/tui/show-toast",
            json!({"message": "saved", "variant": "success", "duration": 500}),
            json!({"type": "tui.toast.show", "properties": {"message": "saved", "variant": "success", "duration": 500}}),
        ),
        (
            "/tui/select-session",
            json!({"sessionID": session}),
            json!({"type": "tui.session.select", "properties": {"sessionID": session}}),
        ),
        (
            "/tui/publish",
            json!({"type": "tui.prompt.append", "properties": {"text": "more"}}),
            json!({"type": "tui.prompt.append", "properties": {"text": "more"}}),
        ),
    ];
    for (path, body, event) in calls {
        assert_eq!(h.post(path, body).await.ok(), json!(true), "{path}");
        let frame = events.until(|f| f.kind().starts_with("tui.")).await;
        assert_eq!(frame.last().map(|f| f.data.clone()), Some(event), "{path}");
    }

    let bad = h
        .post(
            "/tui/show-toast",
            json!({"message": "x", "variant": "loud"}),
        )
        .await
        .error(400, "BadRequest");
    assert!(bad.contains("variant"), "{bad}");
    let foreign = h
        .post(
            "/tui/publish",
            json!({"type": "session.idle", "properties": {"sessionID": session}}),
        )
        .await
        .error(400, "BadRequest");
    assert!(foreign.contains("tui."), "{foreign}");
    let missing = h
        .post(
            "/tui/select-session",
            json!({"sessionID": "ses_fffffffffffeNoSuchSession"}),
        )
        .await
        .error(404, "NotFoundError");
    assert!(
        missing.contains("ses_fffffffffffeNoSuchSession"),
        "{missing}"
    );
}
