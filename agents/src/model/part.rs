//! Part: one piece of a message (text, a tool call, a step boundary, …), tagged by `type`.

use serde::{Deserialize, Serialize};

use super::error::named_api_error;
use super::{ApiError, CreatedTime, JsonObject, ModelRef, Tokens, ToolState};
use crate::id::{MessageId, PartId, SessionId};

/// A part: the ids every part has, plus its `type`-tagged content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Part {
    /// The part's id.
    pub id: PartId,
    /// The session of the message.
    #[serde(rename = "sessionID")]
    pub session_id: SessionId,
    /// The message the part belongs to.
    #[serde(rename = "messageID")]
    pub message_id: MessageId,
    /// What the part holds; its `type` and fields sit beside the ids in JSON.
    #[serde(flatten)]
    pub kind: PartKind,
}

/// The content of a part, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum PartKind {
    /// `text`: text from the user or the model.
    Text(TextPart),
    /// `reasoning`: the model's reasoning text.
    Reasoning(ReasoningPart),
    /// `file`: an attached file or a reference to one.
    File(FilePart),
    /// `tool`: one tool call and its state.
    Tool(ToolPart),
    /// `step-start`: the start of one model call.
    StepStart(StepStartPart),
    /// `step-finish`: the end of one model call, with its cost and tokens.
    StepFinish(StepFinishPart),
    /// `snapshot`: a snapshot of the worktree.
    Snapshot(SnapshotPart),
    /// `patch`: the files a step changed.
    Patch(PatchPart),
    /// `agent`: an `@agent` mention in a prompt.
    Agent(AgentPart),
    /// `retry`: a failed model call that will be retried.
    Retry(RetryPart),
    /// `compaction`: a request to compact the conversation.
    Compaction(CompactionPart),
    /// `subtask`: a subagent task to run (from a command or a prompt).
    Subtask(SubtaskPart),
}

/// The content of a `text` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TextPart {
    /// The text.
    pub text: String,
    /// `true` when taskforce wrote the text rather than the user or the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<bool>,
    /// `true` when the text is kept but not sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored: Option<bool>,
    /// When the text was streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<PartTime>,
    /// Provider metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<JsonObject>,
}

/// `{start, end?}`: when streaming of a part started and ended, epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PartTime {
    /// Start, epoch milliseconds.
    pub start: u64,
    /// End, epoch milliseconds, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
}

/// The content of a `reasoning` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReasoningPart {
    /// The reasoning text.
    pub text: String,
    /// Provider metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<JsonObject>,
    /// When the reasoning was streamed.
    pub time: PartTime,
}

/// The content of a `file` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FilePart {
    /// The MIME type.
    pub mime: String,
    /// The file's name, for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Where the content is: `file://…` or a `data:` URL.
    pub url: String,
    /// Where the reference came from in the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<FilePartSource>,
}

/// Where a file part came from, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FilePartSource {
    /// `file`: a file path.
    File(FileSource),
    /// `symbol`: an LSP symbol in a file.
    Symbol(SymbolSource),
    /// `resource`: an MCP resource.
    Resource(ResourceSource),
}

/// `{value, start, end}`: the text in the prompt that referenced something, and its offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourceText {
    /// The referencing text, e.g. `@src/main.rs`.
    pub value: String,
    /// Start offset in the prompt.
    pub start: u32,
    /// End offset in the prompt.
    pub end: u32,
}

/// A `file` source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FileSource {
    /// The referencing text in the prompt.
    pub text: SourceText,
    /// The file's path.
    pub path: String,
}

/// A `symbol` source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SymbolSource {
    /// The referencing text in the prompt.
    pub text: SourceText,
    /// The file holding the symbol.
    pub path: String,
    /// The symbol's range in the file.
    pub range: Range,
    /// The symbol's name.
    pub name: String,
    /// The LSP `SymbolKind` number.
    pub kind: u32,
}

/// A `resource` source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResourceSource {
    /// The referencing text in the prompt.
    pub text: SourceText,
    /// The MCP client (server name) that serves the resource.
    #[serde(rename = "clientName")]
    pub client_name: String,
    /// The resource's URI.
    pub uri: String,
}

/// An LSP range: `{start, end}` positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Range {
    /// The first position.
    pub start: Position,
    /// The position after the last.
    pub end: Position,
}

/// An LSP position: zero-based line and character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Position {
    /// Zero-based line.
    pub line: u32,
    /// Zero-based character in the line.
    pub character: u32,
}

/// The content of a `tool` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolPart {
    /// The provider's id for the call (plain string, e.g. `toolu_…` or `call_…`).
    #[serde(rename = "callID")]
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Where the call is: pending, running, completed or error.
    pub state: ToolState,
    /// Provider metadata of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<JsonObject>,
}

/// The content of a `step-start` part.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepStartPart {
    /// The worktree snapshot taken before the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

/// The content of a `step-finish` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepFinishPart {
    /// The provider's finish reason (`stop`, `tool-calls`, `length`, …).
    pub reason: String,
    /// The worktree snapshot taken after the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The step's cost in dollars.
    pub cost: f64,
    /// The step's tokens.
    pub tokens: Tokens,
}

/// The content of a `snapshot` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnapshotPart {
    /// The snapshot's id.
    pub snapshot: String,
}

/// The content of a `patch` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PatchPart {
    /// The snapshot the changes are relative to.
    pub hash: String,
    /// The changed files.
    pub files: Vec<String>,
}

/// The content of an `agent` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentPart {
    /// The mentioned agent's name.
    pub name: String,
    /// The mention in the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceText>,
}

/// The content of a `retry` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetryPart {
    /// The attempt number, from 1.
    pub attempt: u32,
    /// The error that caused the retry, as `{"name": "APIError", "data": …}`.
    #[cfg_attr(feature = "openapi", schema(value_type = named_api_error::Named))]
    #[serde(with = "named_api_error")]
    pub error: ApiError,
    /// When the retry was scheduled.
    pub time: CreatedTime,
}

/// The content of a `compaction` part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionPart {
    /// `true` when started automatically on context overflow, `false` when the user asked.
    pub auto: bool,
}

/// The content of a `subtask` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubtaskPart {
    /// The prompt for the subagent.
    pub prompt: String,
    /// A short description of the task.
    pub description: String,
    /// The subagent's name.
    pub agent: String,
    /// The model to use instead of the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The command that created the subtask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl Part {
    /// A part with a fresh id in a message.
    pub fn new(session_id: SessionId, message_id: MessageId, kind: impl Into<PartKind>) -> Self {
        Part {
            id: PartId::new(),
            session_id,
            message_id,
            kind: kind.into(),
        }
    }

    /// The `type` tag of the part, e.g. `"step-finish"`.
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }

    /// The text part's content, if this is one.
    pub fn as_text(&self) -> Option<&TextPart> {
        match &self.kind {
            PartKind::Text(p) => Some(p),
            _ => None,
        }
    }

    /// The tool part's content, if this is one.
    pub fn as_tool(&self) -> Option<&ToolPart> {
        match &self.kind {
            PartKind::Tool(p) => Some(p),
            _ => None,
        }
    }

    /// The tool part's content, mutably, if this is one.
    pub fn as_tool_mut(&mut self) -> Option<&mut ToolPart> {
        match &mut self.kind {
            PartKind::Tool(p) => Some(p),
            _ => None,
        }
    }
}

impl PartKind {
    /// The `type` tag, e.g. `"step-finish"`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PartKind::Text(_) => "text",
            PartKind::Reasoning(_) => "reasoning",
            PartKind::File(_) => "file",
            PartKind::Tool(_) => "tool",
            PartKind::StepStart(_) => "step-start",
            PartKind::StepFinish(_) => "step-finish",
            PartKind::Snapshot(_) => "snapshot",
            PartKind::Patch(_) => "patch",
            PartKind::Agent(_) => "agent",
            PartKind::Retry(_) => "retry",
            PartKind::Compaction(_) => "compaction",
            PartKind::Subtask(_) => "subtask",
        }
    }
}

macro_rules! part_kind_from {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        $(
            impl From<$ty> for PartKind {
                fn from(p: $ty) -> Self {
                    PartKind::$variant(p)
                }
            }
        )*
    };
}

part_kind_from!(
    Text(TextPart),
    Reasoning(ReasoningPart),
    File(FilePart),
    Tool(ToolPart),
    StepStart(StepStartPart),
    StepFinish(StepFinishPart),
    Snapshot(SnapshotPart),
    Patch(PatchPart),
    Agent(AgentPart),
    Retry(RetryPart),
    Compaction(CompactionPart),
    Subtask(SubtaskPart),
);

impl TextPart {
    /// A plain text part with no timing or flags.
    pub fn new(text: impl Into<String>) -> Self {
        TextPart {
            text: text.into(),
            synthetic: None,
            ignored: None,
            time: None,
            metadata: None,
        }
    }

    /// A text part written by taskforce rather than the user or the model.
    pub fn synthetic(text: impl Into<String>) -> Self {
        TextPart {
            synthetic: Some(true),
            ..TextPart::new(text)
        }
    }
}

impl ReasoningPart {
    /// Reasoning text that started streaming at `start` ms.
    pub fn new(text: impl Into<String>, start: u64) -> Self {
        ReasoningPart {
            text: text.into(),
            metadata: None,
            time: PartTime { start, end: None },
        }
    }
}

impl FilePart {
    /// A file part from a MIME type and a URL.
    pub fn new(mime: impl Into<String>, url: impl Into<String>) -> Self {
        FilePart {
            mime: mime.into(),
            filename: None,
            url: url.into(),
            source: None,
        }
    }
}

impl ToolPart {
    /// A tool call that has just started streaming its input (state `pending`).
    pub fn pending(call_id: impl Into<String>, tool: impl Into<String>) -> Self {
        ToolPart {
            call_id: call_id.into(),
            tool: tool.into(),
            state: ToolState::pending(),
            metadata: None,
        }
    }
}

impl StepFinishPart {
    /// The end of a step with its finish reason, cost and tokens.
    pub fn new(reason: impl Into<String>, cost: f64, tokens: Tokens) -> Self {
        StepFinishPart {
            reason: reason.into(),
            snapshot: None,
            cost,
            tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::model::testing::{keys, round_trip, sample};

    const ALL_TYPES: [&str; 12] = [
        "text",
        "reasoning",
        "file",
        "tool",
        "step-start",
        "step-finish",
        "snapshot",
        "patch",
        "agent",
        "retry",
        "compaction",
        "subtask",
    ];

    fn parts() -> Vec<Value> {
        sample(include_str!("../../tests/samples/parts.json"))
            .as_array()
            .unwrap()
            .clone()
    }

    #[test]
    fn every_sample_part_round_trips() {
        let mut seen = Vec::new();
        for json in parts() {
            let part: Part = round_trip(&json);
            assert_eq!(json["type"], part.type_name());
            seen.push(part.type_name());
        }
        for ty in ALL_TYPES {
            assert!(seen.contains(&ty), "no sample for part type {ty}");
        }
    }

    #[test]
    fn parts_parse_straight_from_text() {
        // Storage reads bytes, not `Value`s: the flattened tag must work from a string too.
        let typed: Vec<Part> =
            serde_json::from_str(include_str!("../../tests/samples/parts.json")).unwrap();
        assert_eq!(typed.len(), parts().len());
        let json = serde_json::to_string(&typed).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Part>>(&json).unwrap(), typed);
    }

    #[test]
    fn every_file_source_kind_is_sampled() {
        let mut kinds = Vec::new();
        for json in parts() {
            let part: Part = serde_json::from_value(json).unwrap();
            if let PartKind::File(FilePart {
                source: Some(source),
                ..
            }) = part.kind
            {
                kinds.push(match source {
                    FilePartSource::File(_) => "file",
                    FilePartSource::Symbol(_) => "symbol",
                    FilePartSource::Resource(_) => "resource",
                });
            }
        }
        for kind in ["file", "symbol", "resource"] {
            assert!(kinds.contains(&kind), "no sample for file source {kind}");
        }
    }

    #[test]
    fn unknown_type_is_a_clear_error() {
        let json = json!({
            "id": "prt_01JABCDEFGHJKMNPQRSTVWXYZ0",
            "sessionID": "ses_01JABCDEFGHJKMNPQRSTVWXYZ0",
            "messageID": "msg_01JABCDEFGHJKMNPQRSTVWXYZ0",
            "type": "hologram",
            "text": "hi"
        });
        let err = serde_json::from_value::<Part>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hologram"), "{err}");
        assert!(err.contains("step-finish"), "{err}");
    }

    #[test]
    fn missing_type_is_an_error() {
        let json = json!({
            "id": "prt_1",
            "sessionID": "ses_1",
            "messageID": "msg_1",
            "text": "hi"
        });
        let err = serde_json::from_value::<Part>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("type"), "{err}");
    }

    #[test]
    fn ids_must_have_their_prefixes() {
        let mut json = parts()[0].clone();
        json["messageID"] = json!("prt_01JABCDEF");
        let err = serde_json::from_value::<Part>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("msg_"), "{err}");
    }

    #[test]
    fn new_parts_omit_absent_optionals() {
        let session = SessionId::new();
        let message = MessageId::new();
        let text = Part::new(session.clone(), message.clone(), TextPart::new("hello"));
        assert_eq!(
            keys(&text),
            ["id", "sessionID", "messageID", "type", "text"]
        );
        let step = Part::new(session.clone(), message.clone(), StepStartPart::default());
        assert_eq!(keys(&step), ["id", "sessionID", "messageID", "type"]);
        let tool = Part::new(session, message, ToolPart::pending("toolu_1", "bash"));
        let v = serde_json::to_value(&tool).unwrap();
        assert_eq!(
            v["state"],
            json!({"status": "pending", "input": {}, "raw": ""})
        );
        assert!(v.get("metadata").is_none());
        assert_eq!(tool.as_tool().unwrap().tool, "bash");
        assert!(tool.as_text().is_none());
    }

    #[test]
    fn parts_of_one_message_sort_by_creation() {
        let session = SessionId::new();
        let message = MessageId::new();
        let a = Part::new(session.clone(), message.clone(), TextPart::new("a"));
        let b = Part::new(session, message, TextPart::synthetic("b"));
        assert!(a.id < b.id);
        assert_eq!(b.as_text().unwrap().synthetic, Some(true));
    }
}
