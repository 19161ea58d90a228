//! `task_status {session_id}`: where a child session started by this session's task calls stands
//! (running / completed / error / cancelled), its output so far and its usage.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::background::session_arg;
use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};

const ID: &str = "task_status";

/// The task_status tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskStatusTool;

#[derive(Debug, Deserialize)]
struct Args {
    session_id: String,
}

#[async_trait]
impl Tool for TaskStatusTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/task_status.txt")
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
        let args: Args = parse_args(ID, args)?;
        let child = session_arg(ID, &args.session_id)?;
        let Some(delegate) = ctx.delegate.clone() else {
            return Err(ToolError::Failed("subagents are not available here".into()));
        };
        let report = delegate.task_status(ctx, &child).await?;
        Ok(report.to_output(format!("status of {child}"), ctx))
    }
}
