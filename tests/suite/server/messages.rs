//! Prompting and reading messages: `/message`, `/prompt_async`, `/command`, `/shell`.

use std::time::Duration;

use serde_json::{Value, json};
use taskforce_agents::id::MessageId;
use taskforce_testkit::fake_openai::Response;

use super::{Sse, answers, array, harness, stalls, text_of};

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_answers_the_final_assistant_message_and_keeps_the_clients_message_id() {
    let h = harness().start(answers("Hello from the fake model")).await;
    let s = h.session_id().await;
    let chosen = MessageId::new().to_string();
    let answer = h
        .post(
            &format!("/session/{s}/message"),
            json!({"messageID": chosen, "parts": [{"type": "text", "text": "hi there"}]}),
        )
        .await
        .ok();
    let info = &answer["info"];
    assert_eq!(info["role"], "assistant");
    assert_eq!(info["sessionID"], s.as_str());
    assert_eq!(info["parentID"], chosen.as_str());
    assert_eq!(info["providerID"], "fake");
    assert_eq!(info["modelID"], "gpt-test");
    assert_eq!(info["finish"], "stop");
    assert_eq!(info["tokens"]["output"], 5);
    assert!(info["time"]["completed"].is_u64());
    assert_eq!(text_of(&answer), "Hello from the fake model");
    for part in answer["parts"].as_array().unwrap() {
        assert_eq!(part["messageID"], info["id"]);
    }

    let messages = h.messages(&s).await;
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["info"]["id"], chosen.as_str());
    assert_eq!(messages[0]["info"]["role"], "user");
    assert_eq!(text_of(&messages[0]), "hi there");
    assert_eq!(messages[1], answer);

    let requests = h.fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].contains("hi there"));
}

#[tokio::test(flavor = "multi_thread")]
async fn no_reply_stores_the_user_message_and_asks_no_model() {
    let h = harness().start(answers("noted")).await;
    let s = h.session_id().await;
    let stored = h
        .post(
            &format!("/session/{s}/message"),
            json!({"noReply": true, "parts": [{"type": "text", "text": "remember the number 42"}]}),
        )
        .await
        .ok();
    assert_eq!(stored["info"]["role"], "user");
    assert_eq!(stored["info"]["sessionID"], s.as_str());
    assert_eq!(text_of(&stored), "remember the number 42");
    // No model request now, nor later: the next prompt's request is the only one.
    assert!(h.fake.requests().is_empty(), "no model request");
    assert_eq!(h.messages(&s).await, [stored]);
    assert_eq!(h.get("/session/status").await.ok(), json!({}));

    // The next prompt's model request carries the stored message.
    h.prompt(&s, "what was the number?").await;
    let requests = h.fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].contains("remember the number 42"));
    assert_eq!(h.messages(&s).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_async_answers_204_then_events_and_messages_follow() {
    let h = harness()
        .start(|_| Response::text("async answer").with_delay(Duration::from_millis(20)))
        .await;
    let s = h.session_id().await;
    let mut events = Sse::open(&h, "/event", None).await;
    assert_eq!(events.next().await.kind(), "server.connected");

    let queued = h
        .post(
            &format!("/session/{s}/prompt_async"),
            json!({"parts": [{"type": "text", "text": "in the background"}]}),
        )
        .await;
    assert_eq!(queued.status, 204);
    assert_eq!(queued.body, Value::Null, "204 has no body");

    let seen = events.until(|f| f.is("session.idle", &s)).await;
    let kinds: Vec<&str> = seen.iter().map(|f| f.kind()).collect();
    let busy = seen
        .iter()
        .position(|f| f.is("session.status", &s) && f.properties()["status"]["type"] == "busy")
        .unwrap_or_else(|| panic!("a busy status: {kinds:?}"));
    let text = seen
        .iter()
        .rposition(|f| {
            f.kind() == "message.part.updated" && f.properties()["part"]["text"] == "async answer"
        })
        .unwrap_or_else(|| panic!("the finished text part: {kinds:?}"));
    assert!(busy < text, "{kinds:?}");
    assert!(seen.iter().any(|f| {
        f.kind() == "message.updated" && f.properties()["info"]["role"] == "assistant"
    }));

    let messages = h.messages(&s).await;
    assert_eq!(messages.len(), 2);
    assert_eq!(text_of(&messages[0]), "in the background");
    assert_eq!(text_of(&messages[1]), "async answer");

    let newest = array(h.get(&format!("/session/{s}/message?limit=1")).await.ok());
    assert_eq!(newest, messages[1..]);
    let plenty = array(h.get(&format!("/session/{s}/message?limit=10")).await.ok());
    assert_eq!(plenty, messages);

    let id = messages[1]["info"]["id"].as_str().unwrap();
    let one = h.get(&format!("/session/{s}/message/{id}")).await.ok();
    assert_eq!(one, messages[1]);
    // A message is found under its own session only.
    let other = h.session_id().await;
    h.get(&format!("/session/{other}/message/{id}"))
        .await
        .error(404, "NotFoundError");
    let missing = MessageId::new();
    let message = h
        .get(&format!("/session/{s}/message/{missing}"))
        .await
        .error(404, "NotFoundError");
    assert!(message.contains(missing.as_str()), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_markdown_command_runs_and_an_unknown_one_names_the_known_ones() {
    let h = harness()
        .file(
            ".taskforce/command/x.md",
            "---\ndescription: Greets\n---\nSay hello to $1, then to $2 (all: $ARGUMENTS)",
        )
        .start(answers("hello back"))
        .await;
    let s = h.session_id().await;
    let answer = h
        .post(
            &format!("/session/{s}/command"),
            json!({"command": "/x", "arguments": "Ada Grace Hopper"}),
        )
        .await
        .ok();
    assert_eq!(answer["info"]["role"], "assistant");
    assert_eq!(text_of(&answer), "hello back");
    let requests = h.fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].contains("Say hello to Ada, then to Grace Hopper (all: Ada Grace Hopper)"),
        "{}",
        requests[0].raw_body
    );
    let messages = h.messages(&s).await;
    assert_eq!(messages.len(), 2);
    assert!(
        text_of(&messages[0])
            .contains("Say hello to Ada, then to Grace Hopper (all: Ada Grace Hopper)")
    );

    let message = h
        .post(
            &format!("/session/{s}/command"),
            json!({"command": "nope", "arguments": ""}),
        )
        .await
        .error(400, "BadRequest");
    assert!(message.contains("/nope"), "{message}");
    assert!(message.contains("known commands:"), "{message}");
    assert!(message.contains("review"), "{message}");
    assert!(message.contains('x'), "{message}");
    assert_eq!(h.fake.requests().len(), 1, "no model request for it");
    assert_eq!(h.messages(&s).await.len(), 2, "nothing stored for it");
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_runs_for_the_user_and_is_refused_while_a_prompt_runs() {
    let h = harness().start(|_| stalls()).await;
    let s = h.session_id().await;
    let info = h
        .post(
            &format!("/session/{s}/shell"),
            json!({"agent": "build", "command": "echo hi"}),
        )
        .await
        .ok();
    assert_eq!(info["role"], "assistant");
    assert_eq!(info["sessionID"], s.as_str());
    assert_eq!(info["agent"], "build");
    assert!(info["time"]["completed"].is_u64(), "{info}");
    assert!(
        h.fake.requests().is_empty(),
        "a shell command asks no model"
    );

    let id = info["id"].as_str().unwrap();
    let message = h.get(&format!("/session/{s}/message/{id}")).await.ok();
    assert_eq!(message["info"], info);
    let parts = message["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1);
    let part = &parts[0];
    assert_eq!(part["type"], "tool");
    assert_eq!(part["tool"], "bash");
    assert_eq!(part["state"]["status"], "completed");
    assert_eq!(part["state"]["input"]["command"], "echo hi");
    assert!(
        part["state"]["output"].as_str().unwrap().contains("hi"),
        "{part}"
    );
    let messages = h.messages(&s).await;
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["info"]["role"], "user");

    // While a prompt runs the session is busy.
    let queued = h
        .post(
            &format!("/session/{s}/prompt_async"),
            json!({"parts": [{"type": "text", "text": "stall"}]}),
        )
        .await;
    assert_eq!(queued.status, 204);
    h.wait_for_requests(1).await;
    let busy = h
        .post(
            &format!("/session/{s}/shell"),
            json!({"agent": "build", "command": "echo again"}),
        )
        .await;
    assert_eq!(
        (busy.status.as_u16(), busy.body),
        (
            500,
            json!({"name": "UnknownError", "data": {"message": format!("Session {s} is busy")}})
        )
    );
    h.post(&format!("/session/{s}/abort"), json!({})).await.ok();
    h.poll("/session/status", |b| b == &json!({})).await;
    // The refused command left nothing behind; the session takes shell commands again.
    assert!(
        h.messages(&s)
            .await
            .iter()
            .all(|m| !m.to_string().contains("echo again"))
    );
    let again = h
        .post(
            &format!("/session/{s}/shell"),
            json!({"agent": "build", "command": "echo again"}),
        )
        .await
        .ok();
    assert_eq!(again["role"], "assistant");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_shell_command_shows_busy_and_abort_stops_it() {
    let h = harness().start(answers("unused")).await;
    let s = h.session_id().await;
    let started = std::time::Instant::now();
    let running = {
        let request = h
            .request(reqwest::Method::POST, &format!("/session/{s}/shell"))
            .json(&json!({"agent": "build", "command": "sleep 30"}));
        tokio::spawn(request.send())
    };
    let busy = h.poll("/session/status", |b| b.get(&s).is_some()).await;
    assert_eq!(busy[&s], json!({"type": "busy"}));
    // Prompts without a reply need the session to themselves too.
    let refused = h
        .post(
            &format!("/session/{s}/message"),
            json!({"noReply": true, "parts": [{"type": "text", "text": "note"}]}),
        )
        .await
        .error(500, "UnknownError");
    assert_eq!(refused, format!("Session {s} is busy"));

    assert_eq!(
        h.post(&format!("/session/{s}/abort"), json!({})).await.ok(),
        json!(true)
    );
    let response = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the shell request returns after the abort")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    let info: Value = response.json().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not the full sleep"
    );
    assert_eq!(info["role"], "assistant");
    assert!(info["time"]["completed"].is_u64());
    let id = info["id"].as_str().unwrap();
    let message = h.get(&format!("/session/{s}/message/{id}")).await.ok();
    let state = &message["parts"][0]["state"];
    assert_eq!(state["status"], "error", "{message}");
    assert_eq!(state["error"], "Tool execution aborted");
    h.poll("/session/status", |b| b == &json!({})).await;
    assert!(h.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn message_ids_in_opencodes_scheme_keep_the_history_in_order() {
    let h = harness().start(answers("ok")).await;
    let s = h.session_id().await;
    // OpenCode's ascending ids (`msg_` + hex time + random) sort after taskforce's ULIDs, and a
    // later one before an earlier one's reply would, if the store ordered by id.
    for (id, text) in [
        ("msg_9b1f3a7c2e01ABCDEFGHIJKLMN", "first"),
        ("msg_9b1f3a7c2e02ABCDEFGHIJKLMN", "second"),
    ] {
        h.post(
            &format!("/session/{s}/message"),
            json!({"messageID": id, "parts": [{"type": "text", "text": text}]}),
        )
        .await
        .ok();
    }
    let messages = h.messages(&s).await;
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["info"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(text_of(&messages[0]), "first");
    assert_eq!(text_of(&messages[2]), "second");
    // The second model request saw the first exchange before the second question.
    let second = &h.fake.requests()[1];
    let body = serde_json::to_string(second.messages()).unwrap();
    let first_at = body.find("first").unwrap();
    let second_at = body.find("second").unwrap();
    assert!(first_at < second_at, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_model_is_400_before_anything_runs() {
    let h = harness().start(answers("never")).await;
    let s = h.session_id().await;
    for path in ["message", "prompt_async"] {
        let message = h
            .post(
                &format!("/session/{s}/{path}"),
                json!({"model": {"providerID": "nope", "modelID": "x"}, "parts": [{"type": "text", "text": "hi"}]}),
            )
            .await
            .error(400, "ProviderModelNotFoundError");
        assert!(message.contains("nope"), "{message}");
    }
    assert!(h.messages(&s).await.is_empty());
    assert!(h.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_part_is_rewritten_or_removed_by_a_client() {
    let h = harness().start(answers("the first answer")).await;
    let session = h.session_id().await;
    h.prompt(&session, "hello").await;
    let messages = h.messages(&session).await;
    let answer = messages.last().unwrap();
    let message = answer["info"]["id"].as_str().unwrap().to_string();
    let text = answer["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "text")
        .unwrap()
        .clone();
    let part = text["id"].as_str().unwrap().to_string();
    let path = format!("/session/{session}/message/{message}/part/{part}");

    let mut edited = text.clone();
    edited["text"] = json!("an edited answer");
    assert_eq!(h.patch(&path, edited.clone()).await.ok(), edited);
    assert_eq!(
        text_of(h.messages(&session).await.last().unwrap()),
        "an edited answer"
    );

    let mut elsewhere = edited.clone();
    elsewhere["id"] = json!("prt_0000000000000000000000000z");
    let wrong = h.patch(&path, elsewhere).await.error(400, "BadRequest");
    assert!(wrong.contains("not part"), "{wrong}");

    assert_eq!(h.delete(&path).await.ok(), json!(true));
    let after = h.messages(&session).await;
    assert!(
        after.last().unwrap()["parts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["id"] != json!(part))
    );
    let gone = h.delete(&path).await.error(400, "BadRequest");
    assert!(gone.contains(&part), "{gone}");
    let missing = format!("/session/{session}/message/msg_0000000000000000000000000z/part/{part}");
    h.delete(&missing).await.error(404, "NotFoundError");
}
