//! Subagent results end to end: the task tool's envelope (`details`), its error codes, nesting
//! and output hygiene, over real HTTP to the fake OpenAI-compatible server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::permission::PermissionReply;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, PartKind, Session, ToolMetadata, ToolState};
use taskforce_agents::tool::{TaskEnvelope, TaskErrorCode, TaskMode};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::{until, until_first_child_runs, until_idle};
use taskforce_testkit::script::{is_child, task_call};

use super::runtime::{Env, child_id_in, expect_cancelled, prompt_in_background, tool_parts};

const GENERAL: &str =
    r#"{"description":"Look around","prompt":"Find the answer","subagent_type":"general"}"#;

/// The task part of `session`'s messages: its state.
async fn task_state(rt: &Runtime, session: &SessionId) -> ToolState {
    tool_parts(rt, session)
        .await
        .into_iter()
        .find(|(tool, _)| tool == "task")
        .map(|(_, state)| state)
        .expect("a task part")
}

/// The metadata of a finished tool state.
fn metadata_of(state: &ToolState) -> ToolMetadata {
    match state {
        ToolState::Completed(c) => c.metadata.clone(),
        ToolState::Error(e) => e.metadata.clone().unwrap_or_default(),
        other => panic!("the task part is {}", other.status()),
    }
}

/// The error text of a failed tool state.
fn error_of(state: &ToolState) -> String {
    match state {
        ToolState::Error(e) => e.error.clone(),
        other => panic!("the task part should be an error, is {}", other.status()),
    }
}

/// The first tool result the model was sent (the task call's, in tests without other tools).
fn task_result_seen(fake: &FakeOpenAi) -> String {
    fake.requests()
        .iter()
        .flat_map(|r| r.messages().to_vec())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(String::from))
        .next()
        .unwrap_or_default()
}

async fn prompt(rt: &Runtime, text: &str) -> SessionId {
    let s = rt.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&s.id, PromptInput::text(text)),
    )
    .await
    .expect("the parent never waits forever")
    .unwrap();
    s.id
}

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

#[actix_rt::test]
async fn a_child_cancelled_on_its_own_is_subagent_cancelled() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("never finished").stall_after(2)
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

// ---------------------------------------------------------------- nesting

/// A middle agent (delegates to `leaf`) and a leaf agent, told apart by their prompts.
fn nesting_env(base_url: &str, max_depth: u32) -> Env {
    nesting_env_with(base_url, &format!("max_depth = {max_depth}\n"))
}

/// [`nesting_env`] with `subagent` settings of its own.
pub(super) fn nesting_env_with(base_url: &str, subagent: &str) -> Env {
    let env = Env::new(base_url, &format!("[subagent]\n{subagent}"));
    env.file(
        ".taskforce/agent/middle.md",
        "---\ndescription: Splits work\nmode: subagent\n---\nMIDDLE-AGENT-PROMPT",
    );
    env.file(
        ".taskforce/agent/leaf.md",
        "---\ndescription: Does work\nmode: subagent\n---\nLEAF-AGENT-PROMPT",
    );
    env
}

/// Root → middle → leaf; the leaf calls task anyway, then answers.
fn nesting_model(req: &RecordedRequest) -> Response {
    let first = req.last_role() == Some("user");
    if req.contains("LEAF-AGENT-PROMPT") {
        if first {
            task_call(r#"{"description":"deeper","prompt":"go deeper","subagent_type":"leaf"}"#)
        } else {
            Response::text("leaf done")
        }
    } else if req.contains("MIDDLE-AGENT-PROMPT") {
        if first {
            task_call(
                r#"{"description":"to leaf","prompt":"do the leaf part","subagent_type":"leaf"}"#,
            )
        } else {
            Response::text("middle done")
        }
    } else if first {
        task_call(r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#)
    } else {
        Response::text("root done")
    }
}

#[actix_rt::test]
async fn max_depth_2_nests_root_child_grandchild_and_stops_there() {
    let fake = FakeOpenAi::start(nesting_model).await.unwrap();
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = prompt(&rt, "go").await;
    let middle = rt.children(&root).await.unwrap().remove(0);
    assert!(
        middle.title.contains("@middle subagent"),
        "{}",
        middle.title
    );
    let leaf = rt.children(&middle.id).await.unwrap().remove(0);
    assert!(leaf.title.contains("@leaf subagent"), "{}", leaf.title);
    assert!(
        rt.children(&leaf.id).await.unwrap().is_empty(),
        "depth 3 never starts"
    );

    let requests = fake.requests();
    let (middles, rest): (Vec<_>, Vec<_>) = requests
        .iter()
        .partition(|r| r.contains("MIDDLE-AGENT-PROMPT"));
    let leaves: Vec<_> = rest
        .iter()
        .filter(|r| r.contains("LEAF-AGENT-PROMPT"))
        .collect();
    assert!(!middles.is_empty() && !leaves.is_empty());
    // Depth 1 < 2: the child keeps the task tool; depth 2: the grandchild has none.
    for r in &middles {
        assert!(r.tool_names().contains(&"task"), "{:?}", r.tool_names());
    }
    for r in &leaves {
        assert!(!r.tool_names().contains(&"task"), "{:?}", r.tool_names());
        assert!(r.tool_names().contains(&"read"));
    }

    // The grandchild's forced call got the code, as a management result.
    let state = task_state(&rt, &leaf.id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_DEPTH_EXCEEDED: "),
        "{}",
        error_of(&state)
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(envelope.mode, TaskMode::Management);
    assert_eq!(
        envelope.error.unwrap().code,
        TaskErrorCode::SubagentDepthExceeded
    );
    assert!(envelope.results.is_empty());

    // The answers flowed back up.
    let ToolState::Completed(m) = task_state(&rt, &middle.id).await else {
        panic!("the middle's task completed")
    };
    assert!(m.output.starts_with("leaf done"), "{}", m.output);
    assert_eq!(
        m.metadata.to_json()["details"]["results"][0]["agent"],
        "leaf"
    );
    let ToolState::Completed(r) = task_state(&rt, &root).await else {
        panic!("the root's task completed")
    };
    assert!(r.output.starts_with("middle done"), "{}", r.output);
}

#[actix_rt::test]
async fn a_child_may_not_continue_its_own_root_which_is_waiting_for_it() {
    // Root → middle, and the middle's task call names the root as the session to continue:
    // each would wait for the other, so the call is refused and the tree finishes.
    let root_id = Arc::new(Mutex::new(String::new()));
    let seen = root_id.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        let first = req.last_role() == Some("user");
        if req.contains("MIDDLE-AGENT-PROMPT") {
            if first {
                let root = seen.lock().unwrap().clone();
                task_call(&format!(
                    r#"{{"description":"back up","prompt":"go on","subagent_type":"middle","session_id":"{root}"}}"#
                ))
            } else {
                Response::text("middle done")
            }
        } else if first {
            task_call(r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#)
        } else {
            Response::text("root done")
        }
    })
    .await
    .unwrap();
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    *root_id.lock().unwrap() = root.id.to_string();
    tokio::time::timeout(
        Duration::from_secs(10),
        rt.prompt(&root.id, PromptInput::text("go")),
    )
    .await
    .expect("the tree finishes")
    .unwrap();
    let middle = rt.children(&root.id).await.unwrap().remove(0);
    let state = task_state(&rt, &middle.id).await;
    let error = error_of(&state);
    assert!(
        error.starts_with(&format!(
            "INVALID_INPUT: session_id {} is an ancestor of the calling session",
            root.id
        )),
        "{error}"
    );
    assert!(rt.children(&middle.id).await.unwrap().is_empty());
    let ToolState::Completed(r) = task_state(&rt, &root.id).await else {
        panic!("the root's task completed")
    };
    assert!(r.output.starts_with("middle done"), "{}", r.output);
}

#[actix_rt::test]
async fn cancelling_a_subtree_stops_its_child_while_another_branch_continues_it() {
    // Root → first middle → leaf (answers); then root → second middle, whose call continues
    // that leaf (which stalls). Cancelling the first middle's subtree stops the leaf although
    // it now works for the second middle, whose call reads SUBAGENT_CANCELLED.
    let leaf_id = Arc::new(Mutex::new(String::new()));
    let seen = leaf_id.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        let first = req.last_role() == Some("user");
        let to_middle = r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#;
        if req.contains("LEAF-AGENT-PROMPT") {
            let users = req.messages().iter().filter(|m| m["role"] == "user").count();
            if users == 1 {
                Response::text("leaf done")
            } else {
                Response::text("the leaf never finishes").stall_after(1)
            }
        } else if req.contains("MIDDLE-AGENT-PROMPT") {
            let leaf = seen.lock().unwrap().clone();
            if !first {
                if let Some(id) = child_id_in(&req.raw_body) {
                    *seen.lock().unwrap() = id;
                }
                Response::text("middle done")
            } else if leaf.is_empty() {
                task_call(r#"{"description":"to leaf","prompt":"do it","subagent_type":"leaf"}"#)
            } else {
                task_call(&format!(
                    r#"{{"description":"again","prompt":"go on","subagent_type":"leaf","session_id":"{leaf}"}}"#
                ))
            }
        } else if first || req.messages().iter().filter(|m| m["role"] == "tool").count() == 1 {
            // The root's first turn, and its turn after the first middle's answer.
            task_call(to_middle)
        } else {
            Response::text("root done")
        }
    })
    .await
    .unwrap();
    // Root, first middle, leaf, first middle again, root again, second middle, leaf again.
    let (_env, rt, root, running) = running_tree(&fake, 7, |_| {}).await;
    let middles = rt.children(&root.id).await.unwrap();
    assert_eq!(middles.len(), 2);
    let leaf = rt.children(&middles[0].id).await.unwrap().remove(0);
    assert_eq!(leaf.id.to_string(), *leaf_id.lock().unwrap());
    assert!(rt.statuses().contains_key(&leaf.id), "the leaf runs again");

    rt.cancel(&middles[0].id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the root finished")
        .unwrap()
        .unwrap();
    let state = task_state(&rt, &middles[1].id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_CANCELLED: "),
        "{}",
        error_of(&state)
    );
}

/// A runtime nesting two deep over `fake`, and a root prompted "go" in the background (`before`
/// sees the root first); returned once `requests` model calls came in.
async fn running_tree(
    fake: &FakeOpenAi,
    requests: usize,
    before: impl FnOnce(&Session),
) -> (
    Env,
    Runtime,
    Session,
    tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
) {
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    before(&root);
    let running = prompt_in_background(&rt, &root.id, "go");
    assert!(
        fake.wait_for_requests(requests, Duration::from_secs(10))
            .await
    );
    (env, rt, root, running)
}

/// Cancels `root`, sees its prompt answered cancelled `within`, and waits as long again until
/// no session runs.
async fn cancel_until_idle(
    rt: &Runtime,
    root: &SessionId,
    running: tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
    within: Duration,
) {
    tokio::time::timeout(within, rt.cancel(root))
        .await
        .expect("the cancel returned")
        .unwrap();
    expect_cancelled(running, within, "the root answered").await;
    until_idle(rt).await;
}

#[actix_rt::test]
async fn cancelling_the_root_ends_a_nested_tree_with_every_call_recorded() {
    // Root → middle → leaf, the leaf stalled in its model call.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.contains("LEAF-AGENT-PROMPT") {
            Response::text("the leaf never finishes").stall_after(2)
        } else {
            nesting_model(req)
        }
    })
    .await
    .unwrap();
    let (_env, rt, root, running) = running_tree(&fake, 3, |_| {}).await;
    assert_eq!(rt.statuses().len(), 3, "root, middle and leaf run");
    cancel_until_idle(&rt, &root.id, running, Duration::from_secs(2)).await;
    let middle = rt.children(&root.id).await.unwrap().remove(0);
    let leaf = rt.children(&middle.id).await.unwrap().remove(0);
    // Both task calls ended cancelled, and the leaf's answer is aborted.
    for parent in [&root.id, &middle.id] {
        let state = task_state(&rt, parent).await;
        assert!(
            error_of(&state).starts_with("SUBAGENT_CANCELLED: "),
            "{}",
            error_of(&state)
        );
    }
    let answer = rt.messages(&leaf.id).await.unwrap().pop().unwrap();
    let error = answer.info.as_assistant().unwrap().error.clone().unwrap();
    assert_eq!(error.name(), "MessageAbortedError");
}

/// Root → two middles → a leaf each, `leaf` answering the leaves.
fn two_middles(req: &RecordedRequest, leaf: Response) -> Response {
    let first = req.last_role() == Some("user");
    if req.contains("LEAF-AGENT-PROMPT") {
        leaf
    } else if req.contains("MIDDLE-AGENT-PROMPT") {
        if first {
            task_call(r#"{"description":"to leaf","prompt":"do it","subagent_type":"leaf"}"#)
        } else {
            Response::text("middle done")
        }
    } else if first {
        let middle = r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#;
        Response::tool_calls(&[("call_1", "task", middle), ("call_2", "task", middle)])
    } else {
        Response::text("root done")
    }
}

#[actix_rt::test]
async fn cancelling_the_root_reaches_subtrees_on_both_arbiters() {
    // Root → two middles (one per arbiter) → a stalled leaf each: the middles' runs hang off
    // calls made on the root's arbiter, and at least one of them runs on the other.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        two_middles(
            req,
            Response::text("the leaf never finishes").stall_after(2),
        )
    })
    .await
    .unwrap();
    let (_env, rt, root, running) = running_tree(&fake, 5, |_| {}).await;
    assert_eq!(
        rt.statuses().len(),
        5,
        "root, two middles and two leaves run"
    );
    let middles = rt.children(&root.id).await.unwrap();
    let root_home = rt.arbiter_of(&root.id).await.unwrap().expect("live");
    let mut elsewhere = 0;
    for middle in &middles {
        if rt.arbiter_of(&middle.id).await.unwrap() != Some(root_home) {
            elsewhere += 1;
        }
    }
    assert!(elsewhere >= 1, "a middle runs on the other arbiter");

    cancel_until_idle(&rt, &root.id, running, Duration::from_secs(2)).await;
    // Every call of the tree ended cancelled, and every leaf's answer is aborted.
    let root_calls = tool_parts(&rt, &root.id).await;
    assert_eq!(root_calls.len(), 2);
    for (_, state) in &root_calls {
        assert!(
            error_of(state).starts_with("SUBAGENT_CANCELLED: "),
            "{}",
            error_of(state)
        );
    }
    for middle in &middles {
        let state = task_state(&rt, &middle.id).await;
        assert!(
            error_of(&state).starts_with("SUBAGENT_CANCELLED: "),
            "{}",
            error_of(&state)
        );
        let leaf = rt.children(&middle.id).await.unwrap().remove(0);
        let answer = rt.messages(&leaf.id).await.unwrap().pop().unwrap();
        let error = answer.info.as_assistant().unwrap().error.clone().unwrap();
        assert_eq!(error.name(), "MessageAbortedError");
    }
}

#[actix_rt::test]
async fn a_nested_subtree_runs_on_the_arbiter_of_its_top_level_child() {
    let fake =
        FakeOpenAi::start(|req: &RecordedRequest| two_middles(req, Response::text("leaf done")))
            .await
            .unwrap();
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = prompt(&rt, "go").await;
    let middles = rt.children(&root).await.unwrap();
    assert_eq!(middles.len(), 2);
    let mut homes = Vec::new();
    for middle in &middles {
        let home = rt.arbiter_of(&middle.id).await.unwrap().expect("live");
        let leaves = rt.children(&middle.id).await.unwrap();
        assert_eq!(leaves.len(), 1);
        assert_eq!(
            rt.arbiter_of(&leaves[0].id).await.unwrap(),
            Some(home),
            "a grandchild runs beside its parent"
        );
        homes.push(home);
    }
    // The runtime has two arbiters: the root's two children run on both.
    assert_ne!(homes[0], homes[1]);
    assert!(rt.arbiter_of(&root).await.unwrap().is_some());
}

#[actix_rt::test]
async fn default_depth_1_keeps_children_from_delegating() {
    let fake = FakeOpenAi::start(nesting_model).await.unwrap();
    let env = nesting_env(&fake.base_url(), 1);
    let rt = env.runtime().await;
    let root = prompt(&rt, "go").await;
    let middle = rt.children(&root).await.unwrap().remove(0);
    assert!(rt.children(&middle.id).await.unwrap().is_empty());
    for r in fake
        .requests()
        .iter()
        .filter(|r| r.contains("MIDDLE-AGENT-PROMPT"))
    {
        assert!(!r.tool_names().contains(&"task"), "{:?}", r.tool_names());
    }
    // The child's call anyway reads the depth code rather than "unavailable tool".
    let state = task_state(&rt, &middle.id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_DEPTH_EXCEEDED: "),
        "{}",
        error_of(&state)
    );
}

// ---------------------------------------------------------------- output hygiene

const OPENAI_KEY: &str = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
const GITHUB_TOKEN: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";

/// A child answer with secrets and the home directory on its first line, then `lines` lines.
fn leaky_answer(home: &str, lines: usize) -> String {
    let mut text = format!(
        "Found {OPENAI_KEY} and {GITHUB_TOKEN} in {home}/project/.env\nexport DB_PASSWORD=hunter2"
    );
    for i in 0..lines {
        text.push_str(&format!("\nline {i}"));
    }
    text
}

/// Runs a delegation whose child answers [`leaky_answer`]; the `Env` keeps the project alive.
async fn leaky_run(lines: usize) -> (FakeOpenAi, Runtime, SessionId, String, Env) {
    // The home directory is only known once the runtime is up; the model reads it from there.
    let home = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let model_home = home.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            let home = model_home.lock().unwrap().clone();
            Response::text(&leaky_answer(&home, lines))
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("Done.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let h = rt.paths().home.clone().unwrap().display().to_string();
    *home.lock().unwrap() = h.clone();
    let parent = prompt(&rt, "go").await;
    (fake, rt, parent, h, env)
}

#[actix_rt::test]
async fn child_output_is_redacted_before_it_reaches_the_parent() {
    let (fake, rt, parent, home, _env) = leaky_run(3).await;
    let ToolState::Completed(done) = task_state(&rt, &parent).await else {
        panic!("the task completed")
    };
    for leak in [OPENAI_KEY, GITHUB_TOKEN, "hunter2", home.as_str()] {
        assert!(
            !done.output.contains(leak),
            "{leak} leaked: {}",
            done.output
        );
    }
    assert!(
        done.output.starts_with(
            "Found [REDACTED] and [REDACTED] in ~/project/.env\nexport DB_PASSWORD=[REDACTED]\nline 0"
        ),
        "{}",
        done.output
    );
    assert_eq!(done.metadata["truncated"], false);
    let envelope = TaskEnvelope::from_metadata(&done.metadata).unwrap();
    assert!(envelope.error.is_none());
    let output = envelope.results[0].output.clone().unwrap();
    assert!(!output.contains(OPENAI_KEY) && output.contains("~/project/.env"));
    for item in envelope.results[0].display_items.as_ref().unwrap() {
        assert!(!format!("{item:?}").contains(OPENAI_KEY), "{item:?}");
    }
    // The parent's model never saw the secrets.
    let second = fake
        .requests()
        .into_iter()
        .filter(|r| !is_child(r))
        .nth(1)
        .unwrap();
    assert!(!second.contains(OPENAI_KEY) && !second.contains(GITHUB_TOKEN));
    assert!(second.contains("[REDACTED]"));
    // The child's own stored answer is not rewritten.
    let child = rt.children(&parent).await.unwrap().remove(0);
    let stored: String = rt
        .messages(&child.id)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_text().map(|t| t.text.clone()))
        .collect();
    assert!(stored.contains(OPENAI_KEY), "{stored}");
}

#[actix_rt::test]
async fn long_child_output_is_cut_for_the_model_and_kept_whole_in_details() {
    let (fake, rt, parent, _, _env) = leaky_run(2500).await;
    let child = rt.children(&parent).await.unwrap().remove(0);
    let ToolState::Completed(done) = task_state(&rt, &parent).await else {
        panic!("the task completed")
    };
    assert_eq!(done.metadata["truncated"], true);
    assert!(
        done.output.lines().count() < 2020,
        "{}",
        done.output.lines().count()
    );
    assert!(done.output.contains("line 1997"));
    assert!(!done.output.contains("line 2400"));
    assert!(done.output.contains("SUBAGENT_OUTPUT_TRUNCATED"));
    assert!(done.output.contains(&format!("session_id: {}", child.id)));
    assert!(!done.output.contains(OPENAI_KEY));

    let envelope = TaskEnvelope::from_metadata(&done.metadata).unwrap();
    let error = envelope.error.unwrap();
    assert_eq!(error.code, TaskErrorCode::SubagentOutputTruncated);
    assert!(error.message.contains(&child.id.to_string()));
    let r = &envelope.results[0];
    assert_eq!(r.exit_code, 0);
    let output = r.output.as_deref().unwrap();
    assert_eq!(output.lines().count(), 2502);
    assert!(output.ends_with("line 2499"));
    assert!(!output.contains(OPENAI_KEY));

    // The parent's model got the cut copy.
    let second = fake
        .requests()
        .into_iter()
        .filter(|r| !is_child(r))
        .nth(1)
        .unwrap();
    assert!(second.contains("SUBAGENT_OUTPUT_TRUNCATED"));
    assert!(!second.contains("line 2499"));
}

#[actix_rt::test]
async fn a_childs_tool_titles_are_redacted_in_the_parents_summary() {
    // The child runs a command with a key in it (a bash call's title is its command).
    let command = format!(r#"{{"command":"echo {OPENAI_KEY} > /dev/null"}}"#);
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("call_sh", "bash", command.as_str())])
            } else {
                Response::text("ran it")
            }
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("Done.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "[permission]\nbash = \"allow\"\n");
    let rt = env.runtime().await;
    let mut events = rt.subscribe(Filter::All);
    let parent = prompt(&rt, "go").await;
    let ToolState::Completed(done) = task_state(&rt, &parent).await else {
        panic!("the task completed")
    };
    let summary = done.metadata.to_json()["summary"].to_string();
    assert!(summary.contains("echo [REDACTED]"), "{summary}");
    // Nor did any live update of the parent's part carry it.
    let mut seen = 0;
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(100), events.next()).await
    {
        if let Event::PartUpdated { part, .. } = &e.event
            && part.session_id == parent
            && let PartKind::Tool(tool) = &part.kind
        {
            seen += 1;
            let shown = format!("{:?}", tool.state);
            assert!(!shown.contains(OPENAI_KEY), "{shown}");
        }
    }
    assert!(seen > 0);
    // The child's own part keeps the command it ran.
    let child = rt.children(&parent).await.unwrap().remove(0);
    let (_, state) = tool_parts(&rt, &child.id).await.remove(0);
    assert!(format!("{state:?}").contains(OPENAI_KEY));
}
