//! Tools an agent's model can call: the `Tool` trait, the context a call runs in, the host
//! services the runtime provides (permission asks, live metadata, todos, subagents), and the
//! built-in tools.

mod bash;
pub(crate) use bash::kill_group;
mod context;
mod edit;
mod glob;
mod grep;
mod list;
pub mod paths;
mod read;
mod registry;
mod run;
mod task;
#[cfg(test)]
mod testing;
mod todo;
pub mod truncate;
mod write;

pub use bash::{ARITY, BashTool, command_prefix};
pub use context::{Delegate, SubagentOutcome, SubagentRequest, ToolContext, ToolHost};
pub use edit::EditTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use list::ListTool;
pub use read::ReadTool;
pub use registry::{builtin_tools, find_tool, tool};
pub use run::{ToolArgs, resolve_tool_name, run_tool};
pub use task::TaskTool;
pub use todo::{TodoReadTool, TodoWriteTool};
pub use write::WriteTool;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::agent::{AgentInfo, Registry};
use crate::permission::PermissionError;

/// The ids of the built-in tools, in the order they are offered to a model.
pub const BUILTIN_TOOLS: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "list",
    "glob",
    "grep",
    "todowrite",
    "todoread",
    "task",
];

/// What a successful tool call returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// A short title for user interfaces.
    pub title: String,
    /// The text the model sees.
    pub output: String,
    /// Structured details for user interfaces and embedders.
    pub metadata: Map<String, Value>,
}

/// Why a tool call failed; the `Display` text is what the model sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema.
    #[error(
        "The {tool} tool was called with invalid arguments: {message}.\nPlease rewrite the input so it satisfies the expected schema."
    )]
    InvalidArguments {
        /// The tool id.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A permission rule or the user refused the call.
    #[error(transparent)]
    Permission(#[from] PermissionError),
    /// The call was cancelled.
    #[error("Tool execution aborted")]
    Aborted,
    /// The call ran and failed.
    #[error("{0}")]
    Failed(String),
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The id the model calls it by.
    fn id(&self) -> &'static str;

    /// The description offered to `caller`'s model (the task tool lists the agents it may start).
    fn description(&self, caller: &AgentInfo, registry: &Registry) -> String;

    /// The JSON schema of the arguments.
    fn parameters(&self) -> Value;

    /// Runs the call.
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}
