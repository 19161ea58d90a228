//! The tools about one child session started by this session's task calls, each called as
//! `{session_id}`: `task_status` tells where the child stands (running / completed / error /
//! cancelled) with its output so far and its usage; `task_cancel` cancels it with its whole
//! subtree, and a background child's result then arrives as `cancelled`.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::background::session_arg;
use super::{Delegate, Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::id::SessionId;

/// What a child-session tool does with the child it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChildAction {
    /// `task_status`: report where the child stands.
    Status,
    /// `task_cancel`: cancel the child and its subtree.
    Cancel,
}

/// A tool about one child session: `task_status` or `task_cancel`.
#[derive(Debug, Clone, Copy)]
pub struct TaskChildTool(ChildAction);

impl TaskChildTool {
    /// The `task_status` tool.
    pub const STATUS: TaskChildTool = TaskChildTool(ChildAction::Status);
    /// The `task_cancel` tool.
    pub const CANCEL: TaskChildTool = TaskChildTool(ChildAction::Cancel);
}

/// The arguments of both tools: one child session.
#[derive(Debug, Deserialize)]
struct ChildArgs {
    session_id: String,
}

#[async_trait]
impl Tool for TaskChildTool {
    fn id(&self) -> &'static str {
        match self.0 {
            ChildAction::Status => "task_status",
            ChildAction::Cancel => "task_cancel",
        }
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        match self.0 {
            ChildAction::Status => include_str!("descriptions/task_status.txt"),
            ChildAction::Cancel => include_str!("descriptions/task_cancel.txt"),
        }
        .trim_end()
        .to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "session_id": {"type": "string", "description": "The child's session id (from the task tool's <task_metadata>)"}
            },
            "required": ["session_id"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (child, delegate) = child_call(self.id(), args, ctx)?;
        let (report, title) = match self.0 {
            ChildAction::Status => (
                delegate.task_status(ctx, &child).await?,
                format!("status of {child}"),
            ),
            ChildAction::Cancel => (
                delegate.task_cancel(ctx, &child).await?,
                format!("cancelled {child}"),
            ),
        };
        Ok(report.to_output(title, ctx))
    }

    fn changes_files(&self) -> bool {
        false
    }
}

/// The child session named by a `{session_id}` call of `tool`, and the delegate that can reach
/// it; a clear error when the argument is wrong or subagents are not available.
fn child_call(
    tool: &str,
    args: Value,
    ctx: &ToolContext,
) -> Result<(SessionId, Arc<dyn Delegate>), ToolError> {
    let args: ChildArgs = super::run::parse_args(tool, args)?;
    let child = session_arg(tool, &args.session_id)?;
    let Some(delegate) = ctx.delegate.clone() else {
        return Err(ToolError::Failed("subagents are not available here".into()));
    };
    Ok((child, delegate))
}
