//! `task_cancel {session_id}`: cancels a child session started by this session's task calls,
//! with its whole subtree; a background child's result then arrives as `cancelled`.

use async_trait::async_trait;
use serde_json::Value;

use super::background::{child_call, child_parameters};
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};

const ID: &str = "task_cancel";

/// The task_cancel tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskCancelTool;

#[async_trait]
impl Tool for TaskCancelTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/task_cancel.txt")
            .trim_end()
            .to_string()
    }

    fn parameters(&self) -> Value {
        child_parameters()
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (child, delegate) = child_call(ID, args, ctx)?;
        let report = delegate.task_cancel(ctx, &child).await?;
        Ok(report.to_output(format!("cancelled {child}"), ctx))
    }
}
