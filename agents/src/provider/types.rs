//! The provider-neutral request, history and stream event types.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ProviderError;
use crate::model::ModelRef;

/// Who said a message of the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// The user (also synthetic user text).
    User,
    /// The model.
    Assistant,
    /// Tool results.
    Tool,
}

/// One piece of a history message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A file or image given to the model as a URL (`data:` URLs included).
    File {
        /// The MIME type.
        mime: String,
        /// The URL.
        url: String,
        /// The file name, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    /// A tool call the model made (assistant messages).
    ToolCall {
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments.
        input: Value,
    },
    /// The model's reasoning (assistant messages); adapters that cannot send it back skip it.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// The provider's signature of it (Anthropic's thinking blocks), when the reasoning
        /// came from the model being called.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// The result of a tool call (tool messages).
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The output text (or the error text).
        output: String,
        /// Whether the call failed.
        is_error: bool,
    },
}

/// One message of the history sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Content>,
}

impl ChatMessage {
    /// A message with one text piece.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: vec![Content::Text { text: text.into() }],
        }
    }

    /// The concatenated text pieces of the message.
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool id the model calls it by (shared: the same for every call).
    pub name: Arc<str>,
    /// What the tool does, for the model (shared: the same for every call of one agent).
    pub description: Arc<str>,
    /// The JSON schema of its arguments (shared: the same for every call).
    pub parameters: Arc<Value>,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model id as the provider knows it.
    pub model: String,
    /// The agent making the call (the scripted provider matches on it).
    pub agent: String,
    /// System prompt pieces, in order.
    pub system: Vec<String>,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call (shared: a session's steps offer the same list; a hook
    /// that changes it gets its own copy with `Arc::make_mut`).
    pub tools: Arc<Vec<ToolSpec>>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// The most output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Provider-specific options (from the agent's `options`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Reasoning tokens (part of `output`).
    pub reasoning: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
}

/// Why a model call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model called tools and waits for their results.
    ToolCalls,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else the provider said.
    Other(String),
}

impl FinishReason {
    /// OpenCode's name of the reason (`stop`, `length`, `tool-calls`, …).
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool-calls",
            FinishReason::ContentFilter => "content-filter",
            FinishReason::Other(s) => s,
        }
    }
}

/// One event of a model's response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// The signature of the reasoning streamed so far (Anthropic's `signature_delta`), to be
    /// sent back with it in later requests.
    ReasoningSignature(String),
    /// The model started a tool call; its arguments follow.
    ToolCallStart {
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A complete tool call, arguments as raw JSON text (possibly invalid).
    ToolCall {
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as the model wrote them.
        arguments: String,
    },
    /// Token counts (at most once per call, usually just before `Finish`).
    Usage(Usage),
    /// The call ended.
    Finish(FinishReason),
}

/// A model's response stream; dropping it cancels the call.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ProviderError>> + Send>>;

/// A model that answers a request with a stream of events.
#[async_trait::async_trait]
pub trait LanguageModel: Send + Sync {
    /// The model this instance calls.
    fn model(&self) -> &ModelRef;

    /// Starts a call; errors before the first event (HTTP status, connection) come back here.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError>;
}
