//! Questions an agent asks the user (the `question` tool): what is asked, the request a client
//! answers, and the answers.

use serde::{Deserialize, Serialize};

use crate::id::{QuestionId, SessionId};
use crate::permission::ToolRef;

/// One choice offered with a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuestionOption {
    /// Display text (1-5 words, concise).
    pub label: String,
    /// Explanation of the choice.
    pub description: String,
}

/// One question with its choices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuestionInfo {
    /// The complete question.
    pub question: String,
    /// A very short label (at most 30 characters).
    pub header: String,
    /// The choices.
    pub options: Vec<QuestionOption>,
    /// Whether several choices may be picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiple: Option<bool>,
    /// Whether the user may type an answer of their own (default: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<bool>,
}

impl QuestionInfo {
    /// Whether several choices may be picked.
    pub fn is_multiple(&self) -> bool {
        self.multiple.unwrap_or(false)
    }

    /// Whether the user may type an answer of their own.
    pub fn allows_custom(&self) -> bool {
        self.custom.unwrap_or(true)
    }
}

/// The labels picked (or typed) for one question.
pub type QuestionAnswer = Vec<String>;

/// Questions waiting for the user, as clients see them (`question.asked`, `GET /question`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuestionRequest {
    /// The request's id.
    pub id: QuestionId,
    /// The asking session (a child session when a subagent asks).
    #[serde(rename = "sessionID")]
    pub session_id: SessionId,
    /// The questions, in order.
    pub questions: Vec<QuestionInfo>,
    /// The tool call that asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolRef>,
    /// The root of the asking session's tree.
    #[serde(rename = "rootSessionID")]
    pub root_session_id: SessionId,
    /// The agents from the root session's down to the asking one.
    pub path: Vec<String>,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionError {
    /// The user dismissed it.
    #[error("The user dismissed this question")]
    Rejected,
    /// Nobody can be asked here (no client, or a host that cannot ask).
    #[error("{0}")]
    Unavailable(String),
}
