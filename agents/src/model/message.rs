//! Message: the info of one user or assistant message (its parts are stored separately).

use std::path::PathBuf;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{AssistantError, FileDiff, ModelRef, OutputFormat};
use crate::id::{MessageId, SessionId};

/// A message's info, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// A prompt from the user (or synthesized on their behalf).
    User(UserMessage),
    /// One reply of the model: a turn that may span several steps and tool calls.
    Assistant(AssistantMessage),
}

/// `{created}`: when something was created, in epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedTime {
    /// Creation time, epoch milliseconds.
    pub created: u64,
}

/// The info of a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserMessage {
    /// The message's id.
    pub id: MessageId,
    /// The session the message belongs to.
    #[serde(rename = "sessionID")]
    pub session_id: SessionId,
    /// When the message was created.
    pub time: CreatedTime,
    /// The output format asked for; absent means text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<OutputFormat>,
    /// A generated summary of the turn this message started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<UserSummary>,
    /// The agent that answers this message.
    pub agent: String,
    /// The model that answers this message.
    pub model: ModelRef,
    /// Extra system prompt for this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Per-tool on/off overrides sent with the prompt (deprecated in OpenCode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<IndexMap<String, bool>>,
    /// The model variant (for example a reasoning effort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// The summary of a user's turn: a title, a body and the files it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserSummary {
    /// A short title for the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A longer description of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The files the turn changed.
    pub diffs: Vec<FileDiff>,
}

/// The info of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistantMessage {
    /// The message's id.
    pub id: MessageId,
    /// The session the message belongs to.
    #[serde(rename = "sessionID")]
    pub session_id: SessionId,
    /// When the message was created and completed.
    pub time: AssistantTime,
    /// Why the turn failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AssistantError>,
    /// The user message this one answers.
    #[serde(rename = "parentID")]
    pub parent_id: MessageId,
    /// The model's id.
    #[serde(rename = "modelID")]
    pub model_id: String,
    /// The provider's id.
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// The agent's name (deprecated duplicate of `agent`).
    pub mode: String,
    /// The agent that produced the message.
    pub agent: String,
    /// The working directory and project root of the turn.
    pub path: MessagePath,
    /// `true` for a compaction summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<bool>,
    /// The cost in dollars.
    pub cost: f64,
    /// The tokens used.
    pub tokens: Tokens,
    /// The structured output captured for a `json_schema` format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The model variant used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The provider's finish reason of the last step (`stop`, `tool-calls`, `length`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
}

/// The times of an assistant message, in epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistantTime {
    /// When the message was created.
    pub created: u64,
    /// When the turn ended, successfully or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
}

/// The directories of an assistant turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagePath {
    /// The working directory.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub cwd: PathBuf,
    /// The project's root (worktree).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub root: PathBuf,
}

/// Token counts of a step or a whole assistant message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tokens {
    /// The total, when the provider reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Input tokens (excluding cache reads and writes).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
    /// Prompt-cache tokens.
    pub cache: CacheTokens,
}

/// Prompt-cache token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheTokens {
    /// Tokens read from the cache.
    pub read: u64,
    /// Tokens written to the cache.
    pub write: u64,
}

impl UserMessage {
    /// A user message with a fresh id, for an agent and a model, created at `created` ms.
    pub fn new(
        session_id: SessionId,
        agent: impl Into<String>,
        model: ModelRef,
        created: u64,
    ) -> Self {
        UserMessage {
            id: MessageId::new(),
            session_id,
            time: CreatedTime { created },
            format: None,
            summary: None,
            agent: agent.into(),
            model,
            system: None,
            tools: None,
            variant: None,
        }
    }
}

impl AssistantMessage {
    /// An empty, not yet completed reply with a fresh id to the user message `parent_id`.
    pub fn new(
        session_id: SessionId,
        parent_id: MessageId,
        agent: impl Into<String>,
        model: &ModelRef,
        path: MessagePath,
        created: u64,
    ) -> Self {
        let agent = agent.into();
        AssistantMessage {
            id: MessageId::new(),
            session_id,
            time: AssistantTime {
                created,
                completed: None,
            },
            error: None,
            parent_id,
            model_id: model.model_id.clone(),
            provider_id: model.provider_id.clone(),
            mode: agent.clone(),
            agent,
            path,
            summary: None,
            cost: 0.0,
            tokens: Tokens::default(),
            structured: None,
            variant: None,
            finish: None,
        }
    }

    /// The model that produced the message.
    pub fn model(&self) -> ModelRef {
        ModelRef::new(&self.provider_id, &self.model_id)
    }

    /// Whether the model ended its turn: `finish` is set and is not `tool-calls` or `unknown`.
    pub fn is_finished(&self) -> bool {
        self.finish
            .as_deref()
            .is_some_and(|f| f != "tool-calls" && f != "unknown")
    }
}

impl Message {
    /// The message's id.
    pub fn id(&self) -> &MessageId {
        match self {
            Message::User(m) => &m.id,
            Message::Assistant(m) => &m.id,
        }
    }

    /// The session the message belongs to.
    pub fn session_id(&self) -> &SessionId {
        match self {
            Message::User(m) => &m.session_id,
            Message::Assistant(m) => &m.session_id,
        }
    }

    /// `"user"` or `"assistant"`.
    pub fn role(&self) -> &'static str {
        match self {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
        }
    }

    /// When the message was created, epoch milliseconds.
    pub fn created(&self) -> u64 {
        match self {
            Message::User(m) => m.time.created,
            Message::Assistant(m) => m.time.created,
        }
    }

    /// The agent that the message is for (user) or from (assistant).
    pub fn agent(&self) -> &str {
        match self {
            Message::User(m) => &m.agent,
            Message::Assistant(m) => &m.agent,
        }
    }

    /// The user message, if this is one.
    pub fn as_user(&self) -> Option<&UserMessage> {
        match self {
            Message::User(m) => Some(m),
            Message::Assistant(_) => None,
        }
    }

    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Message::User(_) => None,
            Message::Assistant(m) => Some(m),
        }
    }
}

impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Message::User(m)
    }
}

impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Message::Assistant(m)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::testing::{keys, round_trip, sample};

    #[test]
    fn user_sample_round_trips() {
        let json = sample(include_str!("../../tests/samples/message_user.json"));
        let msg: Message = round_trip(&json);
        let user = msg.as_user().unwrap();
        assert_eq!(user.model, ModelRef::new("anthropic", "claude-sonnet-4-5"));
        assert_eq!(user.tools.as_ref().unwrap().get("bash"), Some(&false));
        assert!(user.system.is_some());
        assert_eq!(msg.role(), "user");
    }

    #[test]
    fn assistant_sample_round_trips() {
        let json = sample(include_str!("../../tests/samples/message_assistant.json"));
        let msg: Message = round_trip(&json);
        let a = msg.as_assistant().unwrap();
        assert_eq!(a.error.as_ref().unwrap().name(), "APIError");
        assert_eq!(a.tokens.cache.read, 1024);
        assert_eq!(a.finish.as_deref(), Some("stop"));
        assert!(a.is_finished());
        assert_eq!(a.model(), ModelRef::new("openai", "gpt-4o-mini"));
    }

    #[test]
    fn minimal_assistant_sample_round_trips() {
        let json = sample(include_str!(
            "../../tests/samples/message_assistant_minimal.json"
        ));
        let msg: Message = round_trip(&json);
        let a = msg.as_assistant().unwrap();
        assert!(a.error.is_none());
        assert_eq!(a.tokens.total, None);
        assert!(!a.is_finished());
    }

    #[test]
    fn constructors_omit_absent_optionals() {
        let session = SessionId::new();
        let user = UserMessage::new(
            session.clone(),
            "build",
            ModelRef::new("openai", "gpt-4"),
            1,
        );
        assert_eq!(
            keys(&Message::from(user.clone())),
            ["role", "id", "sessionID", "time", "agent", "model"]
        );
        let path = MessagePath {
            cwd: "/p".into(),
            root: "/p".into(),
        };
        let reply = AssistantMessage::new(session, user.id, "build", &user.model, path, 2);
        let v = serde_json::to_value(Message::from(reply)).unwrap();
        assert_eq!(v["mode"], "build");
        assert_eq!(v["time"], json!({"created": 2}));
        assert_eq!(
            v["tokens"],
            json!({"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}})
        );
        for absent in ["error", "summary", "structured", "variant", "finish"] {
            assert!(v.get(absent).is_none(), "{absent} should be omitted");
        }
    }

    #[test]
    fn unknown_role_is_a_clear_error() {
        let mut json = sample(include_str!("../../tests/samples/message_user.json"));
        json["role"] = json!("system");
        let err = serde_json::from_value::<Message>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("system") && err.contains("user"), "{err}");
    }

    #[test]
    fn wrong_id_prefix_is_rejected() {
        let mut json = sample(include_str!("../../tests/samples/message_user.json"));
        json["sessionID"] = json!("msg_01JABCDEF");
        let err = serde_json::from_value::<Message>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ses_"), "{err}");
    }
}
