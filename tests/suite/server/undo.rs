//! Undo and redo over HTTP with OpenCode's shapes: `GET /session/:id/diff`,
//! `POST /session/:id/revert` and `/unrevert`.

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};

use super::harness;

/// Rewrites `notes.txt` when asked to, then says so.
fn rewrites_notes(req: &RecordedRequest) -> Response {
    if req.last_role() == Some("tool") {
        Response::text("notes rewritten")
    } else {
        Response::tool_calls(&[(
            "call_write_1",
            "write",
            r#"{"filePath":"notes.txt","content":"rewritten\n"}"#,
        )])
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_is_undone_and_redone_over_http_and_its_diff_is_listed() {
    let h = harness()
        .config("\n[permission]\nedit = \"allow\"\n")
        .file("notes.txt", "first\n")
        .start(rewrites_notes)
        .await;
    let notes = h.project.join("notes.txt");
    let session = h.session_id().await;
    h.prompt(&session, "rewrite the notes").await;
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "rewritten\n");

    let diff = h.get(&format!("/session/{session}/diff")).await.ok();
    assert_eq!(
        diff,
        json!([{"file": "notes.txt", "before": "first\n", "after": "rewritten\n",
                "additions": 1, "deletions": 1, "status": "modified"}])
    );

    let messages = h.messages(&session).await;
    let user = messages[0]["info"]["id"].as_str().unwrap().to_string();
    let one_turn = h
        .get(&format!("/session/{session}/diff?messageID={user}"))
        .await
        .ok();
    assert_eq!(one_turn, diff, "the diff of the one turn is the same");

    let reverted = h
        .post(
            &format!("/session/{session}/revert"),
            json!({"messageID": user}),
        )
        .await
        .ok();
    assert_eq!(reverted["id"], json!(session));
    assert_eq!(reverted["revert"]["messageID"], json!(user));
    assert!(reverted["revert"]["snapshot"].is_string());
    let undone = reverted["revert"]["diff"].as_str().unwrap_or_default();
    assert!(undone.contains("-rewritten"), "{undone}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first\n");
    let stored = h.get(&format!("/session/{session}")).await.ok();
    assert_eq!(stored["revert"], reverted["revert"]);

    let redone = h
        .post(&format!("/session/{session}/unrevert"), Value::Null)
        .await
        .ok();
    assert!(redone.get("revert").is_none(), "{redone}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "rewritten\n");

    let missing = h
        .post(
            &format!("/session/{session}/revert"),
            json!({"messageID": "msg_0123456789abNotAMessage"}),
        )
        .await
        .error(404, "NotFoundError");
    assert!(missing.contains("msg_0123456789abNotAMessage"), "{missing}");
    let unnamed = h
        .post(&format!("/session/{session}/revert"), json!({}))
        .await
        .error(400, "BadRequest");
    assert!(unnamed.contains("messageID"), "{unnamed}");
}
