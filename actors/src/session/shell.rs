//! A shell command the user runs in a session: recorded as a synthetic user message and an
//! assistant message holding a `bash` tool call, run without a permission ask.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use taskforce_agents::id::{CallId, now_ms};
use taskforce_agents::model::{
    AssistantMessage, Message, MessagePath, ModelRef, Part, Session, ToolPart, ToolState,
    ToolStateRunning,
};
use taskforce_agents::permission::{Action, Layers, Rule};
use taskforce_agents::tool::ToolError;
use tokio_util::sync::CancellationToken;

use super::call::{CallSite, call_tool, delegate};
use super::history::SUBTASK_BY_USER;
use super::host::SessionToolHost;
use super::input::{PartInput, PromptInput, create_user_message};
use super::part::SharedPart;
use super::writer::{Item, Writer};
use crate::RuntimeError;
use crate::core::Core;
use crate::store::MessageWithParts;

/// A shell command for a session, in OpenCode's `/session/:id/shell` body shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShellInput {
    /// The agent the messages are recorded under.
    pub agent: String,
    /// The model recorded on the messages; the agent's, else the session's last, else the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The command line.
    pub command: String,
}

/// Runs `input` and appends the two messages to `messages`; answers the assistant message.
pub(crate) async fn run_shell(
    core: &Arc<Core>,
    writer: &Writer,
    session: &Arc<Session>,
    messages: &mut Vec<MessageWithParts>,
    unsaved: &mut bool,
    input: ShellInput,
    token: &CancellationToken,
) -> Result<MessageWithParts, RuntimeError> {
    let agent = core.registry.require_shared(&input.agent)?;
    let prompt = PromptInput {
        parts: vec![PartInput::Text {
            text: SUBTASK_BY_USER.to_string(),
            synthetic: true,
        }],
        agent: Some(input.agent.clone()),
        model: input.model.clone(),
        ..Default::default()
    };
    let new = std::mem::take(unsaved);
    let user = create_user_message(core, writer, session, Some(messages), new, prompt).await?;
    let model = user
        .info
        .as_user()
        .map(|u| u.model.clone())
        .ok_or_else(|| RuntimeError::InvalidInput("the shell's user message is missing".into()))?;
    let user_id = user.info.id().clone();
    messages.push(user);

    let mut assistant = AssistantMessage::new(
        session.id.clone(),
        user_id,
        agent.name.clone(),
        &model,
        MessagePath {
            cwd: session.directory.clone(),
            root: core.paths.project_root.clone(),
        },
        now_ms(),
    );
    let mut args = Map::new();
    args.insert("command".into(), json!(input.command));
    let mut tool_part = ToolPart::pending(CallId::new().to_string(), "bash");
    tool_part.state = ToolState::Running(ToolStateRunning::new(args.clone(), now_ms()));
    let call_id = tool_part.call_id.clone();
    let part = SharedPart::new(Part::new(
        session.id.clone(),
        assistant.id.clone(),
        tool_part,
    ));
    let opening = Arc::new(Message::Assistant(assistant.clone()));
    writer
        .save(&[Item::Message(&opening), Item::Part(&part.lock())])
        .await?;

    // The user typed the command: nothing to ask.
    let host = Arc::new(SessionToolHost::new(
        core.clone(),
        writer.clone(),
        part.clone(),
        Layers::single(vec![Rule::new("*", "*", Action::Allow)]),
    ));
    let site = CallSite {
        core,
        session,
        agent,
        model,
        message_id: assistant.id.clone(),
        token,
    };
    let ctx = site.context(call_id, host, delegate(core, session), false, None);
    let outcome = match core.tools.iter().find(|t| t.id() == "bash") {
        Some(tool) => call_tool(core, tool.as_ref(), Value::Object(args), &ctx).await,
        None => Err(ToolError::Failed("the bash tool is not available".into())),
    };
    let now = now_ms();
    let done = part.update(|p| {
        let Some(tool) = p.as_tool_mut() else { return };
        let ToolState::Running(running) = &tool.state else {
            return;
        };
        let running = running.clone();
        tool.state = match outcome {
            Ok(out) => {
                let mut completed = running.complete(out.output, out.title, now);
                completed.metadata.extend(out.metadata);
                ToolState::Completed(completed)
            }
            Err(ToolError::Aborted) => {
                ToolState::Error(running.fail("Tool execution aborted", now))
            }
            Err(e) => ToolState::Error(running.fail(e.to_string(), now)),
        };
    });
    assistant.time.completed = Some(now);
    let closing = Arc::new(Message::Assistant(assistant));
    writer
        .save(&[Item::Part(&done), Item::Message(&closing)])
        .await?;
    let written = MessageWithParts {
        info: closing,
        parts: vec![done],
    };
    messages.push(written.clone());
    Ok(written)
}
