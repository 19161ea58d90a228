//! What a parent's task call records once its child is done: the envelope with the child's
//! output, tool summary and usage; and the error code and exit code of a child that failed,
//! whose loop crashed, or that was cancelled on its own while the parent carried on. While
//! the child runs, the call is on disk as running and names it.

use std::sync::Arc;
use std::time::Duration;

use taskforce_actors::Hooks;
use taskforce_agents::id::SessionId;
use taskforce_agents::provider::ModelRequest;

use taskforce_agents::model::{Message, ToolState};
use taskforce_agents::tool::{TaskEnvelope, TaskErrorCode, TaskMode};
use taskforce_testkit::fake_openai::{FakeOpenAi, Gate, RecordedRequest, Response};
use taskforce_testkit::runtime::until_first_child_runs;
use taskforce_testkit::script::{delegating, delegating_with, is_child, task_call};

use super::{GENERAL, error_of, metadata_of, prompt, task_result_seen, task_state};
use crate::suite::runtime::{Env, prompt_in_background};

#[actix_rt::test]
async fn task_result_carries_the_envelope_with_the_childs_usage() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("call_read", "read", r#"{"filePath":"notes.txt"}"#)])
            } else {
                Response::text("The answer is 42.")
            }
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("Done.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(
        &fake.base_url(),
        "[provider.fake.models.\"gpt-test\"]\ncost = { input = 1.0, output = 2.0 }\n",
    );
    let rt = env.runtime().await;
    let parent = prompt(&rt, "go").await;
    let child = rt.children(&parent).await.unwrap().remove(0);

    let state = task_state(&rt, &parent).await;
    let ToolState::Completed(done) = &state else {
        panic!("the task completed: {state:?}")
    };
    assert!(
        done.output.starts_with("The answer is 42."),
        "{}",
        done.output
    );
    // The keys clients already read stay.
    assert_eq!(done.metadata["sessionId"], child.id.to_string());
    assert_eq!(done.metadata["model"]["modelID"], "gpt-test");

    let metadata = done.metadata.to_json();
    assert_eq!(metadata["summary"][0]["tool"], "read");
    let details = &metadata["details"];
    assert_eq!(details["mode"], "single");
    assert_eq!(details["runId"].as_str().unwrap().len(), 8);
    assert!(details.get("error").is_none(), "{details}");
    let r = &details["results"][0];
    assert_eq!(r["agent"], "general");
    assert_eq!(r["task"], "Find the answer");
    assert_eq!(r["exitCode"], 0);
    assert_eq!(r["sessionId"], child.id.to_string());
    assert_eq!(r["output"], "The answer is 42.");
    assert_eq!(r["displayItems"][0]["type"], "toolCall");
    assert_eq!(r["displayItems"][0]["name"], "read");
    assert_eq!(r["displayItems"][0]["args"]["filePath"], "notes.txt");
    assert_eq!(r["displayItems"][1]["type"], "text");

    // Usage: the child's two answers (a tool call 10/5, the text 10/4), its own cost.
    let envelope = TaskEnvelope::from_metadata(&done.metadata).expect("a typed envelope");
    assert_eq!(envelope.mode, TaskMode::Single);
    let usage = envelope.results[0].usage;
    assert_eq!((usage.input, usage.output, usage.turns), (20, 9, 2));
    assert_eq!((usage.cache_read, usage.cache_write), (0, 0));
    let child_cost: f64 = rt
        .messages(&child.id)
        .await
        .unwrap()
        .iter()
        .filter_map(|m| match &*m.info {
            Message::Assistant(a) => Some(a.cost),
            Message::User(_) => None,
        })
        .sum();
    assert!(child_cost > 0.0);
    assert!((usage.cost - child_cost).abs() < 1e-12, "{usage:?}");
    assert!((usage.cost - (20.0 * 1.0 + 9.0 * 2.0) / 1e6).abs() < 1e-12);
}

#[actix_rt::test]
async fn a_failed_child_is_subagent_failed_with_exit_code_1() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::error(400, "child exploded")
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("the parent carried on")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = prompt(&rt, "go").await;
    let child = rt.children(&parent).await.unwrap().remove(0);
    let state = task_state(&rt, &parent).await;
    let text = error_of(&state);
    assert!(text.starts_with("SUBAGENT_FAILED: "), "{text}");
    assert!(text.contains("child exploded"), "{text}");
    let metadata = metadata_of(&state);
    assert_eq!(metadata["sessionId"], child.id.to_string());
    let envelope = TaskEnvelope::from_metadata(&metadata).unwrap();
    assert_eq!(
        envelope.error.as_ref().unwrap().code,
        TaskErrorCode::SubagentFailed
    );
    let r = &envelope.results[0];
    assert_eq!(r.exit_code, 1);
    assert_eq!(r.session_id, child.id.to_string());
    assert!(r.error.as_deref().unwrap().contains("child exploded"));
    assert_eq!(r.usage.turns, 1);
    assert!(task_result_seen(&fake).starts_with("SUBAGENT_FAILED: "));
}

/// Hooks that panic before a `general` agent's model call: a child whose loop crashes.
struct CrashingChild;

#[async_trait::async_trait]
impl Hooks for CrashingChild {
    fn chat_request(&self, _: &SessionId, agent: &str, _: &mut ModelRequest) {
        assert_ne!(agent, "general", "simulated crash of the child's loop");
    }
}

#[actix_rt::test]
async fn a_child_whose_loop_crashes_becomes_an_error_result_for_its_parent() {
    let fake = FakeOpenAi::start(delegating(GENERAL, "never asked", "the parent carried on"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    rt.add_hooks(Arc::new(CrashingChild));
    let parent = tokio::time::timeout(Duration::from_secs(5), prompt(&rt, "go"))
        .await
        .expect("the parent never waits forever");
    let text = error_of(&task_state(&rt, &parent).await);
    assert!(text.starts_with("SUBAGENT_FAILED: "), "{text}");
    assert!(text.contains("stopped unexpectedly"), "{text}");
    assert!(
        !fake.requests().iter().any(is_child),
        "the child crashed before its model call"
    );
}

#[actix_rt::test]
async fn a_child_cancelled_on_its_own_is_subagent_cancelled() {
    let fake = FakeOpenAi::start(delegating_with(
        GENERAL,
        || Response::text("never finished").stall_after(2),
        "the parent carried on",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let running = prompt_in_background(&rt, &s.id, "go");
    assert!(fake.wait_for_requests(2, Duration::from_secs(10)).await);
    let child = until_first_child_runs(&rt, &s.id).await;
    rt.cancel(&child.id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let state = task_state(&rt, &s.id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_CANCELLED: Tool execution aborted"),
        "{}",
        error_of(&state)
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(
        envelope.error.unwrap().code,
        TaskErrorCode::SubagentCancelled
    );
    assert_eq!(envelope.results[0].exit_code, 130);
    // The parent's loop went on and read the code.
    assert!(task_result_seen(&fake).starts_with("SUBAGENT_CANCELLED: "));
    // A cancelled step never finished: it has no step-finish part (as in OpenCode); a step
    // that finished has one.
    let is_finish = |p: &std::sync::Arc<taskforce_agents::model::Part>| {
        matches!(p.kind, taskforce_agents::model::PartKind::StepFinish(_))
    };
    let child_answer = rt.messages(&child.id).await.unwrap().pop().unwrap();
    let aborted = child_answer.info.as_assistant().unwrap();
    assert_eq!(
        aborted.error.as_ref().unwrap().name(),
        "MessageAbortedError"
    );
    assert!(!child_answer.parts.iter().any(is_finish));
    let parent_answer = rt.messages(&s.id).await.unwrap().pop().unwrap();
    assert!(parent_answer.info.as_assistant().unwrap().error.is_none());
    assert!(parent_answer.parts.iter().any(is_finish));
}

#[actix_rt::test]
async fn a_task_call_is_on_disk_as_running_naming_its_child_as_soon_as_the_child_starts() {
    let answer = Gate::new();
    let held = answer.clone();
    let fake = FakeOpenAi::start(delegating_with(
        GENERAL,
        move || Response::text("found it").until(&held),
        "the parent carried on",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let running = prompt_in_background(&rt, &s.id, "go");
    // The child is asking its model (which holds its answer): the call has just begun.
    assert!(fake.wait_for_requests(2, Duration::from_secs(10)).await);
    let child = until_first_child_runs(&rt, &s.id).await;
    // Reads wait for the session's queued writes: this is what the disk holds.
    let ToolState::Running(call) = task_state(&rt, &s.id).await else {
        panic!("the task call is stored as running while its child runs")
    };
    let metadata = call
        .metadata
        .expect("the running call's metadata")
        .to_json();
    assert_eq!(metadata["sessionId"], child.id.to_string());
    assert_eq!(call.title.as_deref(), Some("Look around"));

    answer.open();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let state = task_state(&rt, &s.id).await;
    assert_eq!(metadata_of(&state)["sessionId"], child.id.to_string());
}
