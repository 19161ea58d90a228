//! ToolState: where one tool call is (pending, running, completed, error), tagged by `status`.

use serde::{Deserialize, Serialize};

use super::{Part, ToolInput, ToolMetadata};

/// The state of a tool call, tagged by `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ToolState {
    /// `pending`: the model is still streaming the call's input.
    Pending(ToolStatePending),
    /// `running`: the tool is executing.
    Running(ToolStateRunning),
    /// `completed`: the tool returned output.
    Completed(ToolStateCompleted),
    /// `error`: the tool failed, was refused, or was interrupted.
    Error(ToolStateError),
}

/// The `pending` state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolStatePending {
    /// The input parsed so far (OpenCode always writes `{}`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input: ToolInput,
    /// The raw input text streamed so far.
    pub raw: String,
}

/// The `running` state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolStateRunning {
    /// The call's input.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input: ToolInput,
    /// A title set by the tool while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Metadata set by the tool while it runs (the task tool puts `sessionId` here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<ToolMetadata>,
    /// When the tool started.
    pub time: StartTime,
}

/// The `completed` state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolStateCompleted {
    /// The call's input.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input: ToolInput,
    /// The output shown to the model.
    pub output: String,
    /// A short title for display.
    pub title: String,
    /// The tool's metadata.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: ToolMetadata,
    /// When the tool ran, and when its output was compacted away.
    pub time: CompletedTime,
    /// Files the tool returned (file parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Breaks the schema loop Part → ToolState → Part: `Part` is collected as a root.
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub attachments: Option<Vec<Part>>,
}

/// The `error` state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolStateError {
    /// The call's input.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input: ToolInput,
    /// The error text shown to the model.
    pub error: String,
    /// The tool's metadata, if it set any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<ToolMetadata>,
    /// When the tool started and failed.
    pub time: TimeSpan,
}

/// `{start}`: when a tool started, epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartTime {
    /// Start, epoch milliseconds.
    pub start: u64,
}

/// `{start, end}`: a finished interval, epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TimeSpan {
    /// Start, epoch milliseconds.
    pub start: u64,
    /// End, epoch milliseconds.
    pub end: u64,
}

/// `{start, end, compacted?}`: when a completed tool ran and when its output was pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompletedTime {
    /// Start, epoch milliseconds.
    pub start: u64,
    /// End, epoch milliseconds.
    pub end: u64,
    /// When the output was replaced by a placeholder to save context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<u64>,
}

impl ToolState {
    /// The initial state: `{"status": "pending", "input": {}, "raw": ""}`.
    pub fn pending() -> Self {
        ToolState::Pending(ToolStatePending::default())
    }

    /// A running state with an input, started at `start` ms.
    pub fn running(input: impl Into<ToolInput>, start: u64) -> Self {
        ToolState::Running(ToolStateRunning::new(input, start))
    }

    /// The `status` tag: `pending`, `running`, `completed` or `error`.
    pub fn status(&self) -> &'static str {
        super::ToolStatus::of(self).as_str()
    }

    /// The call's input.
    pub fn input(&self) -> &ToolInput {
        match self {
            ToolState::Pending(s) => &s.input,
            ToolState::Running(s) => &s.input,
            ToolState::Completed(s) => &s.input,
            ToolState::Error(s) => &s.input,
        }
    }

    /// The metadata set so far, if any.
    pub fn metadata(&self) -> Option<&ToolMetadata> {
        match self {
            ToolState::Pending(_) => None,
            ToolState::Running(s) => s.metadata.as_ref(),
            ToolState::Completed(s) => Some(&s.metadata),
            ToolState::Error(s) => s.metadata.as_ref(),
        }
    }

    /// Whether the call has ended (completed or error).
    pub fn is_finished(&self) -> bool {
        matches!(self, ToolState::Completed(_) | ToolState::Error(_))
    }
}

impl ToolStateRunning {
    /// A running state with no title or metadata yet.
    pub fn new(input: impl Into<ToolInput>, start: u64) -> Self {
        ToolStateRunning {
            input: input.into(),
            title: None,
            metadata: None,
            time: StartTime { start },
        }
    }

    /// The completed state after the tool returned at `end` ms; keeps the input and metadata.
    pub fn complete(
        self,
        output: impl Into<String>,
        title: impl Into<String>,
        end: u64,
    ) -> ToolStateCompleted {
        ToolStateCompleted {
            input: self.input,
            output: output.into(),
            title: title.into(),
            metadata: self.metadata.unwrap_or_default(),
            time: CompletedTime {
                start: self.time.start,
                end,
                compacted: None,
            },
            attachments: None,
        }
    }

    /// The error state after the tool failed at `end` ms; keeps the input and metadata.
    pub fn fail(self, error: impl Into<String>, end: u64) -> ToolStateError {
        ToolStateError {
            input: self.input,
            error: error.into(),
            metadata: self.metadata,
            time: TimeSpan {
                start: self.time.start,
                end,
            },
        }
    }
}

impl From<ToolStatePending> for ToolState {
    fn from(s: ToolStatePending) -> Self {
        ToolState::Pending(s)
    }
}

impl From<ToolStateRunning> for ToolState {
    fn from(s: ToolStateRunning) -> Self {
        ToolState::Running(s)
    }
}

impl From<ToolStateCompleted> for ToolState {
    fn from(s: ToolStateCompleted) -> Self {
        ToolState::Completed(s)
    }
}

impl From<ToolStateError> for ToolState {
    fn from(s: ToolStateError) -> Self {
        ToolState::Error(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::JsonObject;
    use crate::model::testing::{keys, round_trip, sample};

    #[test]
    fn every_sample_state_round_trips() {
        let samples = sample(include_str!("../../tests/samples/tool_states.json"));
        let mut seen = Vec::new();
        for json in samples.as_array().unwrap() {
            let state: ToolState = round_trip(json);
            assert_eq!(json["status"], state.status());
            seen.push(state.status());
        }
        for status in ["pending", "running", "completed", "error"] {
            assert!(seen.contains(&status), "no sample for {status}");
        }
    }

    #[test]
    fn transitions_keep_input_and_times() {
        let mut input = JsonObject::new();
        input.insert("command".into(), json!("ls"));
        let running = ToolStateRunning::new(input.clone(), 10);
        assert_eq!(
            keys(&ToolState::from(running.clone())),
            ["status", "input", "time"]
        );
        let done = running.clone().complete("a\nb", "ls", 20);
        assert_eq!(*done.input, input);
        assert_eq!(done.time.start, 10);
        assert_eq!(done.time.end, 20);
        let v = serde_json::to_value(ToolState::from(done)).unwrap();
        assert_eq!(v["metadata"], json!({}));
        assert!(v.get("attachments").is_none());
        assert!(v["time"].get("compacted").is_none());
        let failed = ToolState::from(running.fail("boom", 30));
        assert!(failed.is_finished());
        assert_eq!(failed.input()["command"], "ls");
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"status": "error", "input": {"command": "ls"}, "error": "boom", "time": {"start": 10, "end": 30}})
        );
    }

    #[test]
    fn unknown_status_is_a_clear_error() {
        let err = serde_json::from_value::<ToolState>(json!({"status": "paused", "input": {}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("paused") && err.contains("completed"), "{err}");
    }
}
