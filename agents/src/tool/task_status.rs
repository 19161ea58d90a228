//! `task_status {session_id}`: where a child session started by this session's task calls stands
//! (running / completed / error / cancelled), its output so far and its usage.

use async_trait::async_trait;
use serde_json::Value;

use super::background::{child_call, child_parameters};
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};

const ID: &str = "task_status";

/// The task_status tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskStatusTool;

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
        child_parameters()
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (child, delegate) = child_call(ID, args, ctx)?;
        let report = delegate.task_status(ctx, &child).await?;
        Ok(report.to_output(format!("status of {child}"), ctx))
    }
}
