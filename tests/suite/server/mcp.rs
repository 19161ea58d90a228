//! `/mcp` over HTTP in OpenCode's shapes: each server's status (connected, failed with its
//! error, disabled), a server dying mid-call, adding, connecting and disconnecting servers, and
//! the OAuth routes saying taskforce does no MCP sign-in.

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};
use taskforce_testkit::mcp::{HttpFixture, fixture_command};

use super::{Sse, answers, harness};

/// `[mcp.NAME]` running the stdio fixture.
fn local_fixture(name: &str) -> String {
    let command = serde_json::to_string(&fixture_command().expect("the fixture builds")).unwrap();
    format!("[mcp.{name}]\ntype = \"local\"\ncommand = {command}\n")
}

/// A model that calls `fixture_exit` on a user turn and answers afterwards.
fn exits(req: &RecordedRequest) -> Response {
    if req.last_role() == Some("user") {
        Response::tool_calls(&[("call_exit", "fixture_exit", "{}")])
    } else {
        Response::text("the server went away")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_server_has_its_status_and_one_that_dies_is_reported_failed() {
    let config = format!(
        "{}\n[mcp.missing]\ntype = \"local\"\ncommand = [\"/nonexistent/mcp\"]\n\n[mcp.off]\ntype = \"local\"\ncommand = [\"x\"]\nenabled = false\n",
        local_fixture("fixture")
    );
    let h = harness().config(&config).start(exits).await;
    let status = h
        .poll("/mcp", |s| {
            s["fixture"]["status"] == "connected" && s["missing"]["status"] == "failed"
        })
        .await;
    assert_eq!(status["fixture"], json!({"status": "connected"}));
    assert_eq!(status["off"], json!({"status": "disabled"}));
    let error = status["missing"]["error"].as_str().unwrap();
    assert!(error.contains("cannot start `/nonexistent/mcp`"), "{error}");
    let names: Vec<&String> = status.as_object().unwrap().keys().collect();
    assert_eq!(names, ["fixture", "missing", "off"]);

    let mut events = Sse::open(&h, "/event", None).await;
    let session = h.session_id().await;
    h.prompt(&session, "die").await;
    let status = h.poll("/mcp", |s| s["fixture"]["status"] == "failed").await;
    let error = status["fixture"]["error"].as_str().unwrap();
    assert!(error.contains("closed the connection"), "{error}");
    let frames = events
        .until(|f| f.kind() == "mcp.tools.changed" && f.properties()["server"] == "fixture")
        .await;
    assert_eq!(
        frames.last().unwrap().data,
        json!({"type": "mcp.tools.changed", "properties": {"server": "fixture"}})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_are_added_connected_and_disconnected_over_http() {
    let fixture = HttpFixture::start().await.unwrap();
    let h = harness().start(answers("unused")).await;
    assert_eq!(h.get("/mcp").await.ok(), json!({}));

    let added = h
        .post(
            "/mcp",
            json!({"name": "late", "config": {"type": "remote", "url": fixture.url(), "enabled": true}}),
        )
        .await
        .ok();
    assert_eq!(added, json!({"late": {"status": "connected"}}));
    assert_eq!(
        h.post("/mcp/late/disconnect", Value::Null).await.ok(),
        json!(true)
    );
    assert_eq!(
        h.get("/mcp").await.ok(),
        json!({"late": {"status": "disabled"}})
    );
    assert_eq!(
        h.post("/mcp/late/connect", Value::Null).await.ok(),
        json!(true)
    );
    assert_eq!(
        h.get("/mcp").await.ok(),
        json!({"late": {"status": "connected"}})
    );

    let missing = h
        .post("/mcp/nope/connect", Value::Null)
        .await
        .error(404, "NotFoundError");
    assert!(missing.contains("nope"), "{missing}");
    let bad = h
        .post("/mcp", json!({"name": "bad", "config": {"type": "local"}}))
        .await
        .error(400, "BadRequest");
    assert!(bad.contains("mcp.bad.command"), "{bad}");
    let unknown = h
        .post(
            "/mcp",
            json!({"name": "bad", "config": {"type": "local", "comand": ["x"]}}),
        )
        .await
        .error(400, "BadRequest");
    assert!(unknown.contains("comand"), "{unknown}");

    for path in [
        "/mcp/late/auth",
        "/mcp/late/auth/callback",
        "/mcp/late/auth/authenticate",
    ] {
        let refused = h
            .post(path, json!({"code": "x"}))
            .await
            .error(400, "BadRequest");
        assert!(
            refused.contains("does not support OAuth"),
            "{path}: {refused}"
        );
    }
    h.post("/mcp/nope/auth", Value::Null)
        .await
        .error(404, "NotFoundError");
    assert_eq!(
        h.delete("/mcp/late/auth").await.ok(),
        json!({"success": true})
    );
}
