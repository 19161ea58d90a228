//! Subagent results end to end: the task tool's envelope (`details`), its error codes, nesting
//! and output hygiene, over real HTTP to the fake OpenAI-compatible server.
//!
//! Shared here: readers of a parent's task part, a plain prompt, and the middle and leaf agents
//! the nesting tests delegate through.

mod nested_trees;
mod nesting_depth;
mod output_hygiene;
mod refusals;
mod results;

use std::time::Duration;

use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{ToolMetadata, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::task_call;

use super::runtime::{Env, tool_parts};

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
