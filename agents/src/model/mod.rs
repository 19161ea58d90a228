//! The domain model: sessions, messages, parts and tool states, in OpenCode's JSON shapes.
//!
//! Every type serializes to exactly the JSON OpenCode v1.1.65 stores and sends:
//! camel-case ids such as `sessionID`, `type`/`status`/`role`/`name` tags, absent optionals
//! omitted. Times are epoch milliseconds (`u64`), costs are `f64` dollars.

pub mod data_url;
mod diff;
pub mod envelope;
mod error;
mod format;
mod message;
mod model_ref;
mod part;
mod session;
#[cfg(test)]
mod testing;
mod todo;
mod tool_input;
mod tool_metadata;
mod tool_state;
mod tool_summary;

pub use diff::{FileDiff, FileDiffStatus};
pub use error::{
    AbortedError, ApiError, AssistantError, ContextOverflowError, OutputLengthError,
    ProviderAuthError, StructuredOutputError, UnknownError,
};
pub use format::{DEFAULT_RETRY_COUNT, OutputFormat};
pub use message::{
    AssistantMessage, AssistantTime, CacheTokens, CreatedTime, Message, MessagePath, Tokens,
    UserMessage, UserSummary,
};
pub use model_ref::{InvalidModelRef, ModelRef};
pub use part::{
    AgentPart, CompactionPart, FilePart, FilePartSource, FileSource, Part, PartKind, PartTime,
    PatchPart, Position, Range, ReasoningPart, ResourceSource, RetryPart, SnapshotPart, SourceText,
    StepFinishPart, StepStartPart, SubtaskPart, SymbolSource, TextPart, ToolPart,
};
pub use session::{Session, SessionRevert, SessionShare, SessionSummary, SessionTime};
pub use todo::{Todo, TodoPriority, TodoStatus};
pub use tool_input::ToolInput;
pub use tool_metadata::ToolMetadata;
pub use tool_state::{
    CompletedTime, StartTime, TimeSpan, ToolState, ToolStateCompleted, ToolStateError,
    ToolStatePending, ToolStateRunning,
};
pub use tool_summary::{SUMMARY_KEY, SummaryItem, SummaryState, ToolStatus};

/// A free-form JSON object: tool input, metadata, JSON schemas.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
