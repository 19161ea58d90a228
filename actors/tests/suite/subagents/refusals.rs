//! Task calls refused before any child starts: an unknown or primary agent, missing arguments,
//! subagents switched off, an agent kept from delegation, and a rejected permission ask; each
//! with its error code in the envelope and in what the model reads.

use std::time::Duration;

use taskforce_actors::Runtime;
use taskforce_actors::permission::PermissionReply;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolState;
use taskforce_agents::tool::{TaskEnvelope, TaskErrorCode, TaskMode};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::until;
use taskforce_testkit::script::task_call;

use super::{GENERAL, error_of, metadata_of, prompt, task_result_seen, task_state};
use crate::suite::runtime::{Env, prompt_in_background};

/// A parent whose model calls the task tool for `agent`; its call's state, once answered (the
/// fake server and `Env` are returned to keep them alive).
async fn call_for(agent: &str) -> (FakeOpenAi, Env, Runtime, SessionId, ToolState) {
    let call = format!(r#"{{"description":"d","prompt":"p","subagent_type":"{agent}"}}"#);
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            task_call(&call)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = prompt(&rt, "go").await;
    let state = task_state(&rt, &parent).await;
    (fake, env, rt, parent, state)
}

#[actix_rt::test]
async fn unknown_agent_is_a_coded_error_the_model_reads() {
    let (fake, _env, _rt, _parent, state) = call_for("nope").await;
    assert_eq!(
        error_of(&state),
        "UNKNOWN_AGENT: Unknown agent type: nope is not a valid agent type"
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(envelope.mode, TaskMode::Single);
    assert!(envelope.results.is_empty());
    let error = envelope.error.unwrap();
    assert_eq!(error.code, TaskErrorCode::UnknownAgent);
    assert!(error.message.contains("nope is not a valid agent type"));
    assert_eq!(
        task_result_seen(&fake),
        "UNKNOWN_AGENT: Unknown agent type: nope is not a valid agent type"
    );
}

#[actix_rt::test]
async fn a_primary_agent_is_not_started_by_the_model() {
    let (_fake, _env, rt, parent, state) = call_for("build").await;
    assert_eq!(
        error_of(&state),
        "UNKNOWN_AGENT: Agent build is a primary agent, not a subagent: the task tool starts only the subagents it lists"
    );
    assert!(rt.children(&parent).await.unwrap().is_empty());
}

#[actix_rt::test]
async fn missing_arguments_are_invalid_input() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            task_call(r#"{"description":"d","subagent_type":"general"}"#)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = prompt(&rt, "go").await;
    let state = task_state(&rt, &parent).await;
    assert!(
        error_of(&state).starts_with("INVALID_INPUT: The task tool was called with invalid"),
        "{}",
        error_of(&state)
    );
    assert!(rt.children(&parent).await.unwrap().is_empty());
}

#[actix_rt::test]
async fn disabled_subagents_hide_the_task_tool_and_refuse_calls() {
    // The model calls task although it is not offered.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nenabled = false\n");
    let rt = env.runtime().await;
    let parent = prompt(&rt, "go").await;
    let first = &fake.requests()[0];
    assert!(
        !first.tool_names().contains(&"task"),
        "{:?}",
        first.tool_names()
    );
    assert!(first.tool_names().contains(&"read"));
    let state = task_state(&rt, &parent).await;
    assert!(
        error_of(&state).starts_with("SUBAGENTS_DISABLED: "),
        "{}",
        error_of(&state)
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(envelope.mode, TaskMode::Management);
    assert_eq!(
        envelope.error.unwrap().code,
        TaskErrorCode::SubagentsDisabled
    );
    assert!(rt.children(&parent).await.unwrap().is_empty());
    assert!(task_result_seen(&fake).starts_with("SUBAGENTS_DISABLED: "));
}

#[actix_rt::test]
async fn disable_task_agents_are_unlisted_and_refused() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            task_call(r#"{"description":"d","prompt":"p","subagent_type":"secret"}"#)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/agent/secret.md",
        "---\ndescription: Not for delegation\nmode: subagent\ndisable_task: true\n---\nSecret.",
    );
    let rt = env.runtime().await;
    assert!(rt.registry().get("secret").unwrap().disable_task);
    let parent = prompt(&rt, "go").await;
    let first = &fake.requests()[0];
    assert!(!first.contains("Not for delegation"));
    assert!(first.contains("- general:"));
    let state = task_state(&rt, &parent).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_DISABLED: "),
        "{}",
        error_of(&state)
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(
        envelope.error.unwrap().code,
        TaskErrorCode::SubagentDisabled
    );
    assert!(rt.children(&parent).await.unwrap().is_empty());
}

#[actix_rt::test]
async fn a_rejected_task_ask_is_permission_denied() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "[permission]\ntask = \"ask\"\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let running = prompt_in_background(&rt, &s.id, "go");
    until(&rt, "the task call's ask", |rt| async move {
        !rt.pending_permissions().await.is_empty()
    })
    .await;
    let asked = rt.pending_permissions().await.remove(0);
    assert_eq!(asked.permission, "task");
    assert!(
        rt.reply_permission(&asked.id, PermissionReply::Reject, None)
            .await
    );
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let state = task_state(&rt, &s.id).await;
    assert_eq!(
        error_of(&state),
        "PERMISSION_DENIED: The user rejected permission to use this specific tool call."
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(
        envelope.error.unwrap().code,
        TaskErrorCode::PermissionDenied
    );
    assert!(rt.children(&s.id).await.unwrap().is_empty());
    // A rejection still stops the loop: the model was not called again.
    assert_eq!(fake.requests().len(), 1);
}
