//! Questions over HTTP in OpenCode's shapes: `question.asked` on the event stream,
//! `GET /question`, and answers or dismissals through `POST /question/:id/reply|reject`.

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};
use taskforce_testkit::script::last_content;

use super::{Sse, harness};

/// Asks which color on a prompt, then repeats what it heard.
fn asks_color(req: &RecordedRequest) -> Response {
    if req.last_role() == Some("tool") {
        return Response::text(&format!("heard: {}", last_content(req)));
    }
    let questions = json!({"questions": [{
        "question": "Which color?", "header": "Color",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]
    }]});
    Response::tool_calls(&[("call_q", "question", &questions.to_string())])
}

async fn ask(h: &super::Harness, events: &mut Sse, session: &str) -> Value {
    h.post(
        &format!("/session/{session}/prompt_async"),
        json!({"parts": [{"type": "text", "text": "pick a color"}]}),
    )
    .await;
    let frames = events.until(|f| f.kind() == "question.asked").await;
    frames
        .last()
        .map(|f| f.properties().clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_is_listed_answered_over_http_and_the_run_goes_on() {
    let h = harness().start(asks_color).await;
    let session = h.session_id().await;
    let mut events = Sse::open(&h, "/event", None).await;
    let asked = ask(&h, &mut events, &session).await;
    assert_eq!(asked["sessionID"], json!(session));
    assert_eq!(asked["rootSessionID"], json!(session));
    assert_eq!(asked["path"], json!(["build"]));
    assert_eq!(asked["questions"][0]["header"], "Color");
    assert_eq!(asked["tool"]["callID"], "call_q");
    let id = asked["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("que_"), "{id}");
    assert_eq!(h.get("/question").await.ok(), json!([asked]));

    let two = h
        .post(
            &format!("/question/{id}/reply"),
            json!({"answers": [["Red", "Blue"]]}),
        )
        .await
        .error(400, "BadRequest");
    assert!(two.contains("one answer"), "{two}");
    let unnamed = h
        .post(&format!("/question/{id}/reply"), json!({}))
        .await
        .error(400, "BadRequest");
    assert!(unnamed.contains("answers"), "{unnamed}");
    assert_eq!(
        h.post(
            &format!("/question/{id}/reply"),
            json!({"answers": [["Blue"]]})
        )
        .await
        .ok(),
        json!(true)
    );
    let replied = events.until(|f| f.kind() == "question.replied").await;
    assert_eq!(
        replied.last().unwrap().properties(),
        &json!({"sessionID": session, "requestID": id, "answers": [["Blue"]]})
    );
    events.until(|f| f.is("session.idle", &session)).await;
    let messages = h.messages(&session).await;
    assert!(super::text_of(messages.last().unwrap()).contains("\"Which color?\"=\"Blue\""));
    assert_eq!(h.get("/question").await.ok(), json!([]));
    let again = h
        .post(
            &format!("/question/{id}/reply"),
            json!({"answers": [["Red"]]}),
        )
        .await
        .error(404, "NotFoundError");
    assert!(again.contains(&id), "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dismissed_question_is_published_and_ends_the_run() {
    let h = harness().start(asks_color).await;
    let session = h.session_id().await;
    let mut events = Sse::open(&h, "/event", None).await;
    let asked = ask(&h, &mut events, &session).await;
    let id = asked["id"].as_str().unwrap().to_string();
    assert_eq!(
        h.post(&format!("/question/{id}/reject"), Value::Null)
            .await
            .ok(),
        json!(true)
    );
    let rejected = events.until(|f| f.kind() == "question.rejected").await;
    assert_eq!(
        rejected.last().unwrap().properties(),
        &json!({"sessionID": session, "requestID": id})
    );
    events.until(|f| f.is("session.idle", &session)).await;
    let bad = h
        .post("/question/not-an-id/reject", Value::Null)
        .await
        .error(400, "BadRequest");
    assert!(bad.contains("requestID"), "{bad}");
}

/// The root delegates to a child, which delegates to a grandchild, which asks which color;
/// each then reports what it heard.
fn asks_two_levels_down(req: &RecordedRequest) -> Response {
    use taskforce_testkit::script::{first_user, task_call};
    let who = first_user(req);
    let fresh = req.last_role() == Some("user");
    if who.contains("level two") {
        return if fresh {
            asks_color(req)
        } else {
            Response::text("two done")
        };
    }
    if !fresh {
        return Response::text("done");
    }
    let next = if who.contains("level one") {
        "level two"
    } else {
        "level one"
    };
    task_call(&format!(
        r#"{{"description":"go deeper","prompt":"{next}","subagent_type":"general"}}"#
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grandchilds_question_reaches_the_roots_stream_and_is_answered_over_http() {
    let h = harness()
        .config("\n[subagent]\nmax_depth = 2\n\n[agent.general.permission]\nquestion = \"allow\"\n")
        .start(asks_two_levels_down)
        .await;
    let root = h.session_id().await;
    let mut events = Sse::open(&h, "/event", None).await;
    let asked = ask(&h, &mut events, &root).await;
    assert_eq!(asked["rootSessionID"], json!(root));
    assert_eq!(asked["path"], json!(["build", "general", "general"]));
    assert_ne!(asked["sessionID"], json!(root));
    let id = asked["id"].as_str().unwrap().to_string();
    assert_eq!(
        h.post(
            &format!("/question/{id}/reply"),
            json!({"answers": [["Red"]]})
        )
        .await
        .ok(),
        json!(true)
    );
    events.until(|f| f.is("session.idle", &root)).await;
    assert_eq!(
        super::text_of(h.messages(&root).await.last().unwrap()),
        "done"
    );
}
