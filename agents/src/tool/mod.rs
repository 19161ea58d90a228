//! Tools an agent's model can call: the `Tool` trait, the context a call runs in, the host
//! services the runtime provides (permission asks, live metadata, todos, subagents), and the
//! built-in tools.

mod access;
pub mod background;
mod bash;
mod bash_asks;
pub(crate) use bash::{kill_group, shell_command};
mod context;
mod edit;
/// The task tool's result envelope (kept with the model: tool parts hold it typed).
pub use crate::model::envelope;
mod glob;
mod grep;
mod list;
pub mod paths;
mod question;
mod read;
pub mod redact;
mod registry;
mod run;
mod skill;
mod task;
mod task_child;
mod task_parallel;
mod task_start;
#[cfg(test)]
mod testing;
mod todo;
pub mod truncate;
mod web;
mod write;

pub use bash::{ARITY, BashTool, command_prefix};
pub use bash_asks::{BashScope, bash_asks};
pub use context::{
    Delegate, SubagentOutcome, SubagentRequest, SubagentStatus, ToolContext, ToolHost,
};
pub use edit::EditTool;
pub use envelope::{
    DisplayItem, TaskEnvelope, TaskError, TaskErrorCode, TaskMode, TaskResult, TaskUsage,
    TimeoutReason,
};
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use list::ListTool;
pub use question::QuestionTool;
pub use read::{ReadTool, looks_binary};
pub use registry::{builtin_tools, configured_tools, find_tool, tool};
pub use run::{ToolArgs, resolve_tool_name, run_tool};
pub use skill::SkillTool;
pub use task::TaskTool;
pub use task_child::TaskChildTool;
pub use todo::{TodoReadTool, TodoWriteTool};
pub use web::{CodeSearchTool, SearchBackend, WebFetchTool, WebSearchTool, webfetch_pattern};
pub use write::WriteTool;

use async_trait::async_trait;
use serde_json::Value;

use crate::agent::{AgentInfo, Registry};
use crate::model::{FilePart, ToolMetadata};
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
    "task_status",
    "task_cancel",
    "question",
    "skill",
    "webfetch",
    "websearch",
    "codesearch",
];

/// The built-in tools that need a search backend (`[search]`); without one they are not offered.
pub const SEARCH_TOOLS: &[&str] = &["websearch", "codesearch"];

/// What a successful tool call returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// A short title for user interfaces.
    pub title: String,
    /// The text the model sees.
    pub output: String,
    /// Structured details for user interfaces and embedders.
    pub metadata: ToolMetadata,
    /// Files the call returned (a fetched image, an MCP tool's images and binary resources),
    /// kept on the completed tool part and shown to the model after the output.
    pub attachments: Vec<FilePart>,
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
    /// The user dismissed a question, or nobody could be asked.
    #[error(transparent)]
    Question(#[from] crate::question::QuestionError),
    /// The task tool failed with a code; the text the model sees is `CODE: message`.
    #[error("{}", .0.error)]
    Task(Box<TaskFailure>),
}

/// A coded task failure: the error, the metadata (with the envelope under `details`) to keep
/// on the tool part, and the underlying error, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFailure {
    /// The code and message.
    pub error: TaskError,
    /// The tool part's metadata (`details`, and `sessionId`/`model`/`summary` once a child ran).
    pub metadata: ToolMetadata,
    /// The error this one wraps (a permission refusal, an abort), if any.
    pub cause: Option<ToolError>,
}

impl ToolError {
    /// The innermost error: what a coded task failure wraps, else the error itself.
    pub fn cause(&self) -> &ToolError {
        match self {
            ToolError::Task(f) => f.cause.as_ref().map_or(self, ToolError::cause),
            other => other,
        }
    }

    /// The metadata to keep on the failed tool part (coded task failures only).
    pub fn metadata(&self) -> Option<&ToolMetadata> {
        match self {
            ToolError::Task(f) => Some(&f.metadata),
            _ => None,
        }
    }

    /// The metadata to keep on the failed tool part, taken out of the error (coded task
    /// failures only; the error keeps an empty map).
    pub fn take_metadata(&mut self) -> Option<ToolMetadata> {
        match self {
            ToolError::Task(f) => Some(std::mem::take(&mut f.metadata)),
            _ => None,
        }
    }

    /// The task failure's code and message, when this is one.
    pub fn task_error(&self) -> Option<&TaskError> {
        match self {
            ToolError::Task(f) => Some(&f.error),
            _ => None,
        }
    }

    /// Whether the call ended because its own abort signal fired.
    pub fn is_aborted(&self) -> bool {
        matches!(self.cause(), ToolError::Aborted)
    }
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The id the model calls it by (built-in tools answer a constant; an MCP server's tools
    /// are named at run time).
    fn id(&self) -> &str;

    /// The description offered to `caller`'s model (the task tool lists the agents it may start).
    fn description(&self, caller: &AgentInfo, registry: &Registry) -> String;

    /// The JSON schema of the arguments.
    fn parameters(&self) -> Value;

    /// Runs the call.
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;

    /// Whether the tool watches `ctx.abort` itself and returns promptly when it fires, so that
    /// it can report how it ended (the task tool); other tools are dropped on abort.
    fn handles_abort(&self) -> bool {
        false
    }

    /// Whether a call may change files in the project: the worktree is snapshotted before the
    /// first such call of a step, so that the step can be undone. A tool that only reads does
    /// not.
    fn changes_files(&self) -> bool {
        !self.only_reads()
    }

    /// Whether a call only reads (files, the session's own state) and changes nothing: it may
    /// start before its step's opening is on disk, since a crash before then leaves nothing it
    /// did to account for.
    fn only_reads(&self) -> bool {
        false
    }
}
