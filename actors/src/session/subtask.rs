//! Running a subtask part: a command's or a client's subagent task, run through the task tool
//! without its permission ask, recorded as the subagent's answer.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use taskforce_agents::id::{CallId, now_ms};
use taskforce_agents::model::{
    AssistantError, AssistantMessage, Message, MessagePath, Part, PartKind, Session, SubtaskPart,
    TextPart, ToolPart, ToolState, ToolStateRunning, UserMessage,
};
use taskforce_agents::permission::{Layers, merge};
use taskforce_agents::tool::ToolError;
use tokio_util::sync::CancellationToken;

use super::call::{CallSite, call_tool, delegate};
use super::host::SessionToolHost;
use super::part::SharedPart;
use super::tool_end::{Owner, end_running};
use super::writer::{Item, Writer};
use crate::RuntimeError;
use crate::core::Core;
use crate::store::MessageWithParts;

/// What the loop appends after a command's subtask, so the caller's agent takes it from there.
pub const SUMMARIZE: &str = "Summarize the task tool output above and continue with your task.";

/// The subtask part the loop should run next: the last one of the user messages newer than the
/// last assistant message with a finish reason.
pub(crate) fn pending_subtask(messages: &[MessageWithParts]) -> Option<SubtaskPart> {
    let start = messages
        .iter()
        .rposition(|m| matches!(&*m.info, Message::Assistant(a) if a.finish.is_some()))
        .map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.kind {
            PartKind::Subtask(s) => Some(s.clone()),
            _ => None,
        })
        .next_back()
}

/// Runs `task`; returns the messages it wrote. A failing task never stops the loop.
pub(crate) async fn run_subtask(
    core: &Arc<Core>,
    writer: &Writer,
    session: &Arc<Session>,
    messages: &[MessageWithParts],
    task: SubtaskPart,
    token: &CancellationToken,
) -> Result<Vec<MessageWithParts>, RuntimeError> {
    let Some(user) = messages.iter().rev().find_map(|m| match &*m.info {
        Message::User(u) => Some(u.clone()),
        Message::Assistant(_) => None,
    }) else {
        return Err(RuntimeError::InvalidInput("no user message".into()));
    };
    let model = task.model.clone().unwrap_or_else(|| user.model.clone());
    let mut assistant = AssistantMessage::new(
        session.id.clone(),
        user.id.clone(),
        task.agent.clone(),
        &model,
        MessagePath {
            cwd: session.directory.clone(),
            root: core.paths.project_root.clone(),
        },
        now_ms(),
    );
    let mut input = Map::new();
    input.insert("prompt".into(), json!(task.prompt));
    input.insert("description".into(), json!(task.description));
    input.insert("subagent_type".into(), json!(task.agent));
    if let Some(command) = &task.command {
        input.insert("command".into(), json!(command));
    }
    let mut tool_part = ToolPart::pending(CallId::new().to_string(), "task");
    tool_part.state = ToolState::Running(ToolStateRunning::new(input.clone(), now_ms()));
    let part = SharedPart::new(Part::new(
        session.id.clone(),
        assistant.id.clone(),
        tool_part,
    ));
    let opening = Arc::new(Message::Assistant(assistant.clone()));
    writer
        .save(&[Item::Message(&opening), Item::Part(&part.lock())])
        .await?;

    // The subagent's own rules govern the run (the task's agent, else the caller's).
    let agent = Arc::new(
        core.registry
            .get(&task.agent)
            .or_else(|| core.registry.get(&user.agent))
            .unwrap_or_else(|| core.registry.default_agent())
            .clone(),
    );
    let host = Arc::new(SessionToolHost::new(
        core.clone(),
        writer.clone(),
        part.clone(),
        Layers::new(
            merge(&[&agent.permission, session.rules()]),
            session.caller_permission.clone(),
        ),
    ));
    let site = CallSite {
        core,
        session,
        agent,
        model: model.clone(),
        message_id: assistant.id.clone(),
        token,
    };
    let call_id = part
        .lock()
        .as_tool()
        .map(|t| t.call_id.clone())
        .unwrap_or_default();
    let ctx = site.context(
        call_id,
        host,
        delegate(core, session),
        true,
        task.model.clone(),
    );
    let outcome = match core.tools.iter().find(|t| t.id() == "task") {
        Some(tool) => call_tool(core, tool.as_ref(), Value::Object(input), &ctx).await,
        None => Err(ToolError::Failed("the task tool is not available".into())),
    };
    let aborted = matches!(&outcome, Err(e) if e.is_aborted()) || token.is_cancelled();
    let now = now_ms();
    let done = part.update(|p| {
        let owner = Owner::of(p);
        let Some(tool) = p.as_tool_mut() else { return };
        let ToolState::Running(running) = &tool.state else {
            return;
        };
        let running = running.clone();
        // OpenCode's texts; a coded task failure keeps its code after the prefix
        // (`Tool execution failed: SUBAGENT_FAILED: …`) and its envelope in the metadata.
        let text = |e: &ToolError| {
            let message = e.to_string();
            if e.is_aborted() {
                "Tool execution aborted".to_string()
            } else if message.is_empty() {
                "Tool execution failed".to_string()
            } else {
                format!("Tool execution failed: {message}")
            }
        };
        tool.state = end_running(running, outcome, text, now, &owner);
    });
    assistant.finish = Some("tool-calls".into());
    assistant.time.completed = Some(now);
    if aborted {
        assistant.error = Some(AssistantError::aborted("The operation was aborted."));
    }
    let closing = Arc::new(Message::Assistant(assistant));
    writer
        .save(&[Item::Part(&done), Item::Message(&closing)])
        .await?;
    let mut written = vec![MessageWithParts {
        info: closing,
        parts: vec![done],
    }];

    // A command's subtask hands back to the caller's agent with a synthetic instruction.
    if task.command.is_some() && !aborted {
        let next = Arc::new(Message::User(UserMessage::new(
            session.id.clone(),
            user.agent.clone(),
            user.model.clone(),
            now_ms(),
        )));
        let text = Arc::new(Part::new(
            session.id.clone(),
            next.id().clone(),
            TextPart::synthetic(SUMMARIZE),
        ));
        writer
            .save(&[Item::Message(&next), Item::Part(&text)])
            .await?;
        written.push(MessageWithParts {
            info: next,
            parts: vec![text],
        });
    }
    Ok(written)
}
