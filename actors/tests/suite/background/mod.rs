//! Background subagents end to end: `task {background: true}`, the `<task_result>` delivery into
//! the parent, `task_status`, `task_cancel`, cancel propagation and delivery across a restart.
//!
//! Shared here (and with the background limits tests): the background task call and readers
//! of the deliveries, outputs and session ids it leaves.

mod across_runtimes;
mod delivery;
mod managing_children;

use taskforce_actors::Runtime;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, ToolState};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};
use taskforce_testkit::runtime::until;

use super::runtime::tool_parts;

pub(super) const BACKGROUND: &str =
    r#"{"description":"Dig","prompt":"Dig deep","subagent_type":"general","background":true}"#;

/// The first `ses_…` id in `text`.
pub(super) fn session_in(text: &str) -> Option<String> {
    let at = text.find("ses_")?;
    Some(
        text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect(),
    )
}

/// The child id named in `req`'s first tool result (the background task's answer).
pub(super) fn child_in(req: &RecordedRequest) -> String {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .find_map(|m| m["content"].as_str().and_then(session_in))
        .unwrap_or_default()
}

pub(super) fn call(id: &str, tool: &str, args: String) -> Response {
    Response::tool_calls(&[(id, tool, args.as_str())])
}

/// Waits until `check` holds on `session`'s messages.
pub(super) async fn wait_for_messages(
    rt: &Runtime,
    session: &SessionId,
    what: &str,
    check: impl Fn(&[taskforce_actors::store::MessageWithParts]) -> bool,
) {
    let check = &check;
    until(rt, what, |rt| async move {
        check(&rt.messages(session).await.unwrap())
    })
    .await;
}

/// The synthetic `<task_result>` texts of `messages`' user messages.
pub(super) fn deliveries(messages: &[taskforce_actors::store::MessageWithParts]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_text())
        .filter(|t| t.synthetic == Some(true) && t.text.starts_with("<task_result "))
        .map(|t| t.text.clone())
        .collect()
}

fn last_assistant_text(messages: &[taskforce_actors::store::MessageWithParts]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| matches!(*m.info, Message::Assistant(_)))
        .map(|m| {
            m.parts
                .iter()
                .filter_map(|p| p.as_text().map(|t| t.text.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The outputs (or error texts) of `session`'s `tool` parts, in order.
pub(super) async fn outputs_of(rt: &Runtime, session: &SessionId, tool: &str) -> Vec<String> {
    tool_parts(rt, session)
        .await
        .into_iter()
        .filter(|(t, _)| t == tool)
        .map(|(_, state)| match state {
            ToolState::Completed(c) => c.output,
            ToolState::Error(e) => e.error,
            other => format!("<{}>", other.status()),
        })
        .collect()
}
