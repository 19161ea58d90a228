//! How a background child's result reaches its parent: the call returns at once and the result
//! starts a new parent turn, or a busy parent's loop picks it up; cancelling the parent cancels
//! the child.

use std::time::Duration;

use taskforce_actors::PromptInput;
use taskforce_agents::model::{Message, ToolState};
use taskforce_agents::tool::background::EXIT_RUNNING;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::until_first_child_runs;
use taskforce_testkit::script::{is_child, last_content, task_call, tool_results};

use super::{
    BACKGROUND, call, child_in, deliveries, last_assistant_text, outputs_of, wait_for_messages,
};
use crate::suite::runtime::{Env, tool_parts};

#[actix_rt::test]
async fn background_returns_at_once_and_the_result_starts_a_parent_turn() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("the child found gold").with_delay(Duration::from_millis(150))
        } else if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
            if tool_results(req) == 1 {
                call(
                    "call_status",
                    "task_status",
                    format!(r#"{{"session_id":"{}"}}"#, child_in(req)),
                )
            } else {
                Response::text("unexpected")
            }
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else if tool_results(req) == 1 {
            Response::text("started it")
        } else {
            Response::text("the parent read the result")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let first = rt
        .prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    assert_eq!(
        last_assistant_text(std::slice::from_ref(&first)),
        "started it"
    );

    // The task call returned while the child still runs (its row is stored with its first
    // message, which may come after the parent's answer).
    let child = until_first_child_runs(&rt, &parent.id).await;
    let state = tool_parts(&rt, &parent.id)
        .await
        .into_iter()
        .find(|(t, _)| t == "task")
        .map(|(_, s)| s)
        .unwrap();
    let ToolState::Completed(done) = state else {
        panic!("the background call completes at once: {state:?}")
    };
    assert!(
        done.output.contains("running in the background"),
        "{}",
        done.output
    );
    assert!(done.output.contains(&format!("session_id: {}", child.id)));
    assert_eq!(done.metadata["background"], true);
    assert_eq!(done.metadata["status"], "running");
    assert_eq!(
        done.metadata.to_json()["details"]["results"][0]["exitCode"],
        EXIT_RUNNING
    );

    // The child's end starts a parent turn on the delivered result.
    wait_for_messages(&rt, &parent.id, "the parent's answer to the result", |m| {
        last_assistant_text(m) == "the parent read the result"
    })
    .await;
    let messages = rt.messages(&parent.id).await.unwrap();
    let delivered = deliveries(&messages);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].starts_with(&format!(
        "<task_result session_id=\"{}\" status=\"completed\">",
        child.id
    )));
    assert!(delivered[0].contains("the child found gold"));
    let seen = fake
        .requests()
        .iter()
        .filter(|r| !is_child(r))
        .any(|r| r.contains("<task_result session_id=") && r.contains("the child found gold"));
    assert!(seen, "the parent's model was sent the result");

    // task_status after the end: completed, with the output and the child's usage.
    let status = outputs_of(&rt, &parent.id, "task_status").await;
    assert_eq!(status.len(), 1, "{status:?}");
    assert!(status[0].contains("status=\"completed\""), "{}", status[0]);
    assert!(status[0].contains("the child found gold"), "{}", status[0]);
    assert!(status[0].contains("1 turns"), "{}", status[0]);
}

#[actix_rt::test]
async fn a_result_arriving_while_the_parent_is_busy_is_picked_up_by_its_loop() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("quick child answer")
        } else if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
            Response::text("picked it up")
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else {
            // The parent keeps streaming while the child finishes.
            Response::text("a slow parent answer that takes a while to stream")
                .with_delay(Duration::from_millis(150))
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let last = tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&parent.id, PromptInput::text("go")),
    )
    .await
    .unwrap()
    .unwrap();
    // The same loop ran on into the delivered result.
    assert_eq!(
        last_assistant_text(std::slice::from_ref(&last)),
        "picked it up"
    );
    let messages = rt.messages(&parent.id).await.unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| match *m.info {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
        })
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "assistant", "user", "assistant"]
    );
    assert_eq!(deliveries(&messages).len(), 1);
}

#[actix_rt::test]
async fn cancelling_the_parent_cancels_its_background_child() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("never finishing").stall_after(2)
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else {
            Response::text("launched")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    // The child stores its row with its first message, which a loaded machine may not have
    // reached when the parent's turn ends.
    let child = until_first_child_runs(&rt, &parent.id).await;

    rt.cancel(&parent.id).await.unwrap();
    // The cancelled result is recorded in the idle parent without starting a turn.
    wait_for_messages(&rt, &parent.id, "the cancelled result", |m| {
        deliveries(m)
            .iter()
            .any(|d| d.contains("status=\"cancelled\""))
    })
    .await;
    assert!(!rt.statuses().contains_key(&child.id), "the child stopped");
    let turns = fake
        .requests()
        .iter()
        .filter(|r| !is_child(r) && r.contains("<task_result "))
        .count();
    assert_eq!(turns, 0, "a cancelled result does not start a turn");
}
