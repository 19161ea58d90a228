//! A child session after its first task call: a later call continues it, a call may not
//! continue a session of another tree, and cancelling the parent stops a stalled child.

use std::time::Duration;

use taskforce_actors::PromptInput;
use taskforce_agents::model::{Message, PartKind, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::runtime::{until_first_child_runs, until_idle};
use taskforce_testkit::script::{is_child, task_call};

use super::{Env, child_id_in, expect_cancelled, prompt_in_background, tool_parts};

#[actix_rt::test]
async fn resume_continues_the_same_child() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            let turns = req.messages().iter().filter(|m| m["role"] == "user").count();
            Response::text(&format!("child turn {turns}"))
        } else if req.last_role() == Some("user") {
            let resume = child_id_in(&req.raw_body)
                .map(|id| format!(r#","session_id":"{id}""#))
                .unwrap_or_default();
            task_call(&format!(
                r#"{{"description":"Count","prompt":"Count your turns","subagent_type":"general"{resume}}}"#
            ))
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("first"))
        .await
        .unwrap();
    rt.prompt(&parent.id, PromptInput::text("again"))
        .await
        .unwrap();
    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(
        children.len(),
        1,
        "the second task call continued the first child"
    );
    let child_messages = rt.messages(&children[0].id).await.unwrap();
    let users = child_messages
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .count();
    assert_eq!(users, 2);
    let parts = tool_parts(&rt, &parent.id).await;
    let ToolState::Completed(second) = &parts[1].1 else {
        panic!("second task should complete")
    };
    assert!(
        second.output.starts_with("child turn 2"),
        "{}",
        second.output
    );
}

#[actix_rt::test]
async fn cancelling_the_parent_stops_a_stalled_child_within_a_second() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("this answer never finishes because the stream stalls").stall_after(3)
        } else {
            task_call(
                r#"{"description":"Stall","prompt":"take forever","subagent_type":"general"}"#,
            )
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let running = prompt_in_background(&rt, &parent.id, "go");
    assert!(fake.wait_for_requests(2, Duration::from_secs(10)).await);
    until_first_child_runs(&rt, &parent.id).await;
    rt.cancel(&parent.id).await.unwrap();
    expect_cancelled(
        running,
        Duration::from_secs(1),
        "the parent answered within one second",
    )
    .await;
    assert!(fake.wait_for_disconnects(1, Duration::from_secs(2)).await);

    let child = rt.children(&parent.id).await.unwrap().remove(0);
    // The child's loop makes its last writes, then every session is idle.
    until_idle(&rt).await;
    for id in [&parent.id, &child.id] {
        for (tool, state) in tool_parts(&rt, id).await {
            assert!(state.is_finished(), "{tool} left {}", state.status());
        }
    }
    let ToolState::Error(e) = &tool_parts(&rt, &parent.id).await[0].1 else {
        panic!("the task part should be an error")
    };
    assert!(
        e.error
            .starts_with("SUBAGENT_CANCELLED: Tool execution aborted"),
        "{}",
        e.error
    );
    let metadata = e.metadata.as_ref().unwrap().to_json();
    let details = &metadata["details"];
    assert_eq!(details["error"]["code"], "SUBAGENT_CANCELLED");
    assert_eq!(details["results"][0]["sessionId"], child.id.to_string());
    assert_eq!(details["results"][0]["exitCode"], 130);
    let child_messages = rt.messages(&child.id).await.unwrap();
    let Message::Assistant(a) = &*child_messages.last().unwrap().info else {
        panic!("the child's last message is its answer")
    };
    assert_eq!(a.error.as_ref().unwrap().name(), "MessageAbortedError");
    assert!(
        child_messages
            .last()
            .unwrap()
            .parts
            .iter()
            .all(|p| match &p.kind {
                PartKind::Tool(t) => t.state.is_finished(),
                _ => true,
            })
    );
}

#[actix_rt::test]
async fn a_task_cannot_continue_a_session_of_another_tree() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("child")
        } else if req.last_role() == Some("user") {
            let last = req
                .messages()
                .last()
                .map(|m| m["content"].to_string())
                .unwrap_or_default();
            let target = last.split("resume ").nth(1).map(|t| {
                t.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .to_string()
            });
            let resume = target
                .map(|id| format!(r#","session_id":"{id}""#))
                .unwrap_or_default();
            task_call(&format!(
                r#"{{"description":"d","prompt":"p","subagent_type":"general"{resume}}}"#
            ))
        } else {
            Response::text("done")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let first = rt.create_session(None, None).await.unwrap();
    rt.prompt(&first.id, PromptInput::text("start"))
        .await
        .unwrap();
    let foreign_child = rt.children(&first.id).await.unwrap().remove(0);
    let second = rt.create_session(None, None).await.unwrap();
    rt.prompt(
        &second.id,
        PromptInput::text(format!("resume {}", foreign_child.id)),
    )
    .await
    .unwrap();
    let ToolState::Error(e) = &tool_parts(&rt, &second.id).await[0].1 else {
        panic!("the task call should fail")
    };
    assert!(
        e.error.contains("belongs to another session tree"),
        "{}",
        e.error
    );
    assert!(rt.children(&second.id).await.unwrap().is_empty());
}
