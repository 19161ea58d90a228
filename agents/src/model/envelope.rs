//! The task tool's result envelope: the `details` key of its metadata (devkit-pi's result
//! schema, extended with `SUBAGENT_CANCELLED`, `SUBAGENT_LIMIT_REACHED` and
//! `PERMISSION_DENIED`).
//!
//! The model reads a failure as the tool's error text `CODE: message` (for example
//! `UNKNOWN_AGENT: Unknown agent type: x is not a valid agent type`); machines read the same
//! code from `details.error.code`. Success keeps OpenCode's output (the child's answer plus a
//! `<task_metadata>` block) and adds `details` beside the `sessionId`, `model` and `summary`
//! metadata keys.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ToolInput;

/// The metadata key holding the envelope.
pub const DETAILS_KEY: &str = "details";

/// How many characters a run id has.
pub const RUN_ID_LEN: usize = 8;

/// The exit code of a child that finished its answer.
pub const EXIT_OK: i32 = 0;

/// The exit code of a child whose run failed (model, provider or runtime error).
pub const EXIT_FAILED: i32 = 1;

/// The exit code of a child that was cancelled (as a shell reports an interrupt).
pub const EXIT_CANCELLED: i32 = 130;

/// The exit code of a child that ran past its time limit (as `timeout(1)` reports it).
pub const EXIT_TIMEOUT: i32 = 124;

/// Which limit ended a child that timed out: `details.results[i].timeoutReason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutReason {
    /// The hard cap on one run (`subagent.timeout`, or the call's lower `timeout`).
    Runtime,
    /// No model stream event or tool status change for `subagent.idle_timeout`.
    Idle,
}

impl TimeoutReason {
    /// The reason as it is written: `runtime` or `idle`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutReason::Runtime => "runtime",
            TimeoutReason::Idle => "idle",
        }
    }
}

/// A stable, machine-readable reason a task call did not (fully) succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskErrorCode {
    /// The arguments are missing a required field or have the wrong shape.
    InvalidInput,
    /// Subagents are switched off (`subagent.enabled = false`) or not available here.
    SubagentsDisabled,
    /// `subagent_type` names no agent.
    UnknownAgent,
    /// The agent exists but may not be started by the task tool (`disable_task: true`).
    SubagentDisabled,
    /// The calling session is already at `subagent.max_depth`.
    SubagentDepthExceeded,
    /// The child ran longer than its time limit.
    SubagentTimeout,
    /// The child's run failed (model, provider or runtime error).
    SubagentFailed,
    /// The child's output was cut for the model; the full text is in `details`.
    SubagentOutputTruncated,
    /// The child was cancelled (by its parent or on its own).
    SubagentCancelled,
    /// Too many children are running or were started.
    SubagentLimitReached,
    /// A permission rule or the user refused the task call.
    PermissionDenied,
}

impl TaskErrorCode {
    /// The code as it is written: `SUBAGENT_FAILED` and so on.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskErrorCode::InvalidInput => "INVALID_INPUT",
            TaskErrorCode::SubagentsDisabled => "SUBAGENTS_DISABLED",
            TaskErrorCode::UnknownAgent => "UNKNOWN_AGENT",
            TaskErrorCode::SubagentDisabled => "SUBAGENT_DISABLED",
            TaskErrorCode::SubagentDepthExceeded => "SUBAGENT_DEPTH_EXCEEDED",
            TaskErrorCode::SubagentTimeout => "SUBAGENT_TIMEOUT",
            TaskErrorCode::SubagentFailed => "SUBAGENT_FAILED",
            TaskErrorCode::SubagentOutputTruncated => "SUBAGENT_OUTPUT_TRUNCATED",
            TaskErrorCode::SubagentCancelled => "SUBAGENT_CANCELLED",
            TaskErrorCode::SubagentLimitReached => "SUBAGENT_LIMIT_REACHED",
            TaskErrorCode::PermissionDenied => "PERMISSION_DENIED",
        }
    }
}

impl fmt::Display for TaskErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{code, message}`: why a task call failed; displayed as `CODE: message` for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskError {
    /// The stable code.
    pub code: TaskErrorCode,
    /// What happened, for people and models.
    pub message: String,
}

impl fmt::Display for TaskError {
    /// `CODE: message`, written piece by piece (one is formatted per task call's end).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code.as_str())?;
        f.write_str(": ")?;
        f.write_str(&self.message)
    }
}

impl std::error::Error for TaskError {}

impl TaskError {
    /// `CODE: message` as a new string (what [`Display`](fmt::Display) writes).
    pub fn text(&self) -> String {
        [self.code.as_str(), ": ", &self.message].concat()
    }

    /// An error with `code` and `message`.
    pub fn new(code: TaskErrorCode, message: impl Into<String>) -> Self {
        TaskError {
            code,
            message: message.into(),
        }
    }
}

/// What kind of call produced an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// One child run.
    #[default]
    Single,
    /// Several children at once (fan-out).
    Parallel,
    /// A guard answered without starting a child (depth limit, subagents disabled).
    Management,
}

/// The child's own usage over one run: tokens and cost summed over its assistant messages.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct TaskUsage {
    /// Input tokens (excluding cache reads and writes).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
    /// Tokens written to the prompt cache.
    pub cache_write: u64,
    /// Cost in USD.
    pub cost: f64,
    /// How many assistant messages the child wrote.
    pub turns: u32,
}

impl TaskUsage {
    /// Counts one assistant message: its tokens and cost, and one turn.
    pub fn add_turn(&mut self, answer: &super::AssistantMessage) {
        self.input += answer.tokens.input;
        self.output += answer.tokens.output;
        self.cache_read += answer.tokens.cache.read;
        self.cache_write += answer.tokens.cache.write;
        self.cost += answer.cost;
        self.turns += 1;
    }
}

/// One rich-rendering item of a child's answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub enum DisplayItem {
    /// Text the child wrote.
    Text {
        /// The text.
        text: String,
    },
    /// A tool the child called.
    ToolCall {
        /// The tool id.
        name: String,
        /// The call's input (shared with the child's part).
        args: ToolInput,
    },
}

/// The result of one child run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskResult {
    /// The subagent's name.
    pub agent: String,
    /// The task (prompt) it was given.
    pub task: String,
    /// 0 finished, 1 failed, 124 timed out, 130 cancelled.
    pub exit_code: i32,
    /// The child session.
    pub session_id: String,
    /// The child's own usage over this run.
    pub usage: TaskUsage,
    /// Why the run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Which limit ended the run, when it timed out (`SUBAGENT_TIMEOUT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_reason: Option<TimeoutReason>,
    /// The child's final text, secrets redacted, never truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The child's texts and tool calls, for rich rendering (the format may change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_items: Option<Vec<DisplayItem>>,
}

/// The task tool's `details`: `{mode, runId, results, error?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskEnvelope {
    /// What kind of call this was.
    pub mode: TaskMode,
    /// The call's run id (8 characters).
    pub run_id: String,
    /// One entry per child run (none when no child was started).
    pub results: Vec<TaskResult>,
    /// Why the call failed, or that its output was truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TaskError>,
}

impl TaskEnvelope {
    /// An envelope with a fresh run id and no results yet.
    pub fn new(mode: TaskMode) -> Self {
        TaskEnvelope {
            mode,
            run_id: new_run_id(),
            results: Vec::new(),
            error: None,
        }
    }

    /// The envelope of a tool part's metadata, if it has one.
    pub fn from_metadata(metadata: &super::ToolMetadata) -> Option<Self> {
        metadata.details().cloned()
    }

    /// The envelope as a JSON value (for the `details` metadata key).
    pub fn to_value(&self) -> Value {
        // A struct of strings, numbers and enums always serializes.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A fresh run id: 8 lowercase hex characters from a new ULID's random bits.
pub fn new_run_id() -> String {
    let random = ulid::Ulid::new().random();
    format!("{:08x}", random & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_error_reads_code_then_message() {
        let e = TaskError::new(TaskErrorCode::UnknownAgent, "Unknown agent type: x");
        assert_eq!(e.text(), "UNKNOWN_AGENT: Unknown agent type: x");
        assert_eq!(e.to_string(), e.text());
    }

    #[test]
    fn codes_serialize_in_screaming_snake_case() {
        for code in [
            TaskErrorCode::InvalidInput,
            TaskErrorCode::SubagentsDisabled,
            TaskErrorCode::UnknownAgent,
            TaskErrorCode::SubagentDisabled,
            TaskErrorCode::SubagentDepthExceeded,
            TaskErrorCode::SubagentTimeout,
            TaskErrorCode::SubagentFailed,
            TaskErrorCode::SubagentOutputTruncated,
            TaskErrorCode::SubagentCancelled,
            TaskErrorCode::SubagentLimitReached,
            TaskErrorCode::PermissionDenied,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
            let back: TaskErrorCode = serde_json::from_value(json!(code.as_str())).unwrap();
            assert_eq!(back, code);
        }
    }

    #[test]
    fn task_error_displays_code_then_message() {
        let e = TaskError::new(TaskErrorCode::UnknownAgent, "Unknown agent type: x");
        assert_eq!(e.to_string(), "UNKNOWN_AGENT: Unknown agent type: x");
    }

    #[test]
    fn run_ids_have_eight_hex_characters() {
        let a = new_run_id();
        assert_eq!(a.len(), RUN_ID_LEN);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, new_run_id());
    }

    #[test]
    fn envelope_uses_the_published_field_names() {
        let mut envelope = TaskEnvelope::new(TaskMode::Single);
        envelope.results.push(TaskResult {
            agent: "general".into(),
            task: "look".into(),
            exit_code: EXIT_OK,
            session_id: "ses_1".into(),
            usage: TaskUsage {
                input: 1,
                output: 2,
                cache_read: 3,
                cache_write: 4,
                cost: 0.5,
                turns: 1,
            },
            error: None,
            timeout_reason: None,
            output: Some("done".into()),
            display_items: Some(vec![
                DisplayItem::Text {
                    text: "done".into(),
                },
                DisplayItem::ToolCall {
                    name: "read".into(),
                    args: ToolInput::from(
                        json!({"filePath": "a"})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    ),
                },
            ]),
        });
        let v = envelope.to_value();
        assert_eq!(v["mode"], "single");
        assert_eq!(v["runId"].as_str().unwrap().len(), 8);
        let r = &v["results"][0];
        assert_eq!(r["exitCode"], 0);
        assert_eq!(r["sessionId"], "ses_1");
        assert_eq!(
            r["usage"],
            json!({"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "cost": 0.5, "turns": 1})
        );
        assert_eq!(r["displayItems"][1]["type"], "toolCall");
        assert!(r.get("error").is_none());
        assert!(r.get("timeoutReason").is_none());
        assert!(v.get("error").is_none());
        let mut meta = serde_json::Map::new();
        meta.insert(DETAILS_KEY.into(), v);
        let meta = crate::model::ToolMetadata::from(meta);
        assert_eq!(TaskEnvelope::from_metadata(&meta), Some(envelope));
    }
}
