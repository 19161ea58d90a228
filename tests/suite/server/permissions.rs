//! Permission asks over HTTP: listing, replying (current and deprecated routes), unknown ids.

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};
use taskforce_testkit::script::call_then;
use tokio::task::JoinHandle;

use super::{Harness, PATIENCE, array, harness, text_of};

/// Calls bash on a user turn; answers with what the tool returned otherwise.
fn bash_then_answer() -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    call_then(
        Response::tool_calls(&[(
            "call_bash_1",
            "bash",
            r#"{"command":"echo approved","description":"Say approved"}"#,
        )]),
        "bash finished",
    )
}

async fn asking() -> Harness {
    harness()
        .config("[permission]\nbash = \"ask\"\n")
        .start(bash_then_answer())
        .await
}

/// Sends a prompt in the background; answers the pending ask once it is listed.
async fn prompt_until_asked(h: &Harness, session: &str) -> (JoinHandle<(u16, Value)>, Value) {
    let request = h
        .request(
            reqwest::Method::POST,
            &format!("/session/{session}/message"),
        )
        .json(&json!({"parts": [{"type": "text", "text": "run it"}]}));
    let waiting = tokio::spawn(async move {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    });
    let pending = h.poll("/permission", |b| b != &json!([])).await;
    let mut pending = array(pending);
    assert_eq!(pending.len(), 1, "{pending:?}");
    (waiting, pending.remove(0))
}

async fn answered(waiting: JoinHandle<(u16, Value)>) -> Value {
    let (status, body) = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the prompt finishes after the reply")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

fn bash_part(message: &Value) -> Value {
    message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool" && p["tool"] == "bash")
        .cloned()
        .unwrap_or_else(|| panic!("a bash part in {message}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listed_ask_replied_once_lets_the_prompt_finish() {
    let h = asking().await;
    let s = h.session_id().await;
    let (waiting, ask) = prompt_until_asked(&h, &s).await;
    let id = ask["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("per_"), "{ask}");
    assert_eq!(ask["sessionID"], s.as_str());
    assert_eq!(ask["permission"], "bash");
    assert_eq!(ask["patterns"], json!(["echo approved"]));
    assert_eq!(ask["tool"]["callID"], "call_bash_1");
    assert!(
        ask["tool"]["messageID"]
            .as_str()
            .unwrap()
            .starts_with("msg_")
    );

    assert_eq!(
        h.post(&format!("/permission/{id}/reply"), json!({"reply": "once"}))
            .await
            .ok(),
        json!(true)
    );
    let answer = answered(waiting).await;
    assert_eq!(text_of(&answer), "bash finished");
    assert_eq!(h.get("/permission").await.ok(), json!([]));
    let messages = h.messages(&s).await;
    let part = bash_part(&messages[1]);
    assert_eq!(part["state"]["status"], "completed");
    assert!(
        part["state"]["output"]
            .as_str()
            .unwrap()
            .contains("approved")
    );
    assert_eq!(h.fake.requests().len(), 2);

    // The ask is gone: a second reply is a 404.
    let message = h
        .post(&format!("/permission/{id}/reply"), json!({"reply": "once"}))
        .await
        .error(404, "NotFoundError");
    assert!(message.contains(&id), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_ask_stops_the_loop() {
    let h = asking().await;
    let s = h.session_id().await;
    let (waiting, ask) = prompt_until_asked(&h, &s).await;
    let id = ask["id"].as_str().unwrap();
    assert_eq!(
        h.post(
            &format!("/permission/{id}/reply"),
            json!({"reply": "reject"})
        )
        .await
        .ok(),
        json!(true)
    );
    let answer = answered(waiting).await;
    assert_eq!(answer["info"]["role"], "assistant");
    let part = bash_part(&answer);
    assert_eq!(part["state"]["status"], "error");
    assert!(
        part["state"]["error"]
            .as_str()
            .unwrap()
            .contains("rejected permission"),
        "{part}"
    );
    assert_eq!(
        h.fake.requests().len(),
        1,
        "the loop stopped after the reject"
    );
    assert_eq!(h.get("/permission").await.ok(), json!([]));
    h.poll("/session/status", |b| b == &json!({})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reject_with_a_message_tells_the_model_and_the_loop_goes_on() {
    let h = asking().await;
    let s = h.session_id().await;
    let (waiting, ask) = prompt_until_asked(&h, &s).await;
    let id = ask["id"].as_str().unwrap();
    h.post(
        &format!("/permission/{id}/reply"),
        json!({"reply": "reject", "message": "use printf instead"}),
    )
    .await
    .ok();
    let answer = answered(waiting).await;
    assert_eq!(text_of(&answer), "bash finished");
    let requests = h.fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].contains("use printf instead"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_deprecated_session_permissions_route_answers_too() {
    let h = asking().await;
    let s = h.session_id().await;
    let other = h.session_id().await;
    let (waiting, ask) = prompt_until_asked(&h, &s).await;
    let id = ask["id"].as_str().unwrap();

    // Another session's route does not answer this ask.
    h.post(
        &format!("/session/{other}/permissions/{id}"),
        json!({"response": "once"}),
    )
    .await
    .error(404, "NotFoundError");
    let message = h
        .post(
            &format!("/session/{s}/permissions/{id}"),
            json!({"reply": "once"}),
        )
        .await
        .error(400, "BadRequest");
    assert!(message.contains("response"), "{message}");
    assert_eq!(
        array(h.get("/permission").await.ok()).len(),
        1,
        "still pending"
    );

    assert_eq!(
        h.post(
            &format!("/session/{s}/permissions/{id}"),
            json!({"response": "always"})
        )
        .await
        .ok(),
        json!(true)
    );
    let answer = answered(waiting).await;
    assert_eq!(text_of(&answer), "bash finished");
    assert_eq!(h.get("/permission").await.ok(), json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_and_malformed_request_ids() {
    let h = asking().await;
    let message = h
        .post(
            "/permission/per_01UNKNOWNREQUEST/reply",
            json!({"reply": "once"}),
        )
        .await
        .error(404, "NotFoundError");
    assert!(message.contains("per_01UNKNOWNREQUEST"), "{message}");
    let message = h
        .post("/permission/not-an-id/reply", json!({"reply": "once"}))
        .await
        .error(400, "BadRequest");
    assert!(message.contains("requestID"), "{message}");
    assert!(message.contains("not-an-id"), "{message}");
    let message = h
        .post("/permission/per_abc/reply", json!({"reply": "sometimes"}))
        .await
        .error(400, "BadRequest");
    assert!(message.contains("reply"), "{message}");
    assert!(message.contains("sometimes"), "{message}");
}
