//! Whether a task call may start the subagent it names: the agent must be one the task tool
//! starts, and the caller's `task` permission must allow it (asking the user when the rules
//! say so). Both the single and the parallel form of the call check here.

use serde_json::{Map, json};

use super::envelope::{TaskError, TaskErrorCode};
use super::{ToolContext, ToolError};
use crate::agent::AgentInfo;
use crate::permission::PermissionAsk;

/// The agent named `name`, if the task tool may start it: known, a subagent (a primary agent
/// only when the user asked for it, as a command's subtask) and not `disable_task`.
pub(super) fn startable<'a>(ctx: &'a ToolContext, name: &str) -> Result<&'a AgentInfo, TaskError> {
    let Some(agent) = ctx.registry.get(name) else {
        return Err(TaskError::new(
            TaskErrorCode::UnknownAgent,
            format!("Unknown agent type: {name} is not a valid agent type"),
        ));
    };
    if !agent.is_subagent() && !ctx.bypass_agent_check {
        return Err(TaskError::new(
            TaskErrorCode::UnknownAgent,
            format!(
                "Agent {name} is a primary agent, not a subagent: the task tool starts only the subagents it lists"
            ),
        ));
    }
    if agent.disable_task {
        return Err(TaskError::new(
            TaskErrorCode::SubagentDisabled,
            format!(
                "Agent {} may not be started by the task tool (disable_task: true)",
                agent.name
            ),
        ));
    }
    Ok(agent)
}

/// Asks the `task` permission to start `subagent_type` for `description`, unless the user asked
/// for the run (then no check applies); stops waiting when the call is aborted. A refusal or an
/// abort is the coded error it stands for, beside the error behind it.
pub(super) async fn ask_to_start(
    ctx: &ToolContext,
    description: &str,
    subagent_type: &str,
) -> Result<(), (TaskError, ToolError)> {
    if ctx.bypass_agent_check {
        return Ok(());
    }
    let mut metadata = Map::new();
    metadata.insert("description".into(), json!(description));
    metadata.insert("subagent_type".into(), json!(subagent_type));
    let ask = ctx.ask(PermissionAsk {
        permission: "task".into(),
        patterns: vec![subagent_type.to_string()],
        always: vec!["*".into()],
        force_ask: false,
        metadata,
    });
    let asked = tokio::select! {
        biased;
        () = ctx.abort.cancelled() => Err(ToolError::Aborted),
        r = ask => r,
    };
    asked.map_err(|e| {
        let code = if e.is_aborted() {
            TaskErrorCode::SubagentCancelled
        } else {
            TaskErrorCode::PermissionDenied
        };
        (TaskError::new(code, e.to_string()), e)
    })
}
