//! The shapes of permission asks and answers: requests, replies, and where an ask comes from.

use crate::id::{MessageId, PermissionId, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An answer to a permission ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PermissionReply {
    /// Allow this call only.
    Once,
    /// Allow this call and, from now on, the ask's `always` patterns.
    Always,
    /// Refuse the call.
    Reject,
}

/// The tool call behind an ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolRef {
    /// The assistant message that made the call.
    #[serde(rename = "messageID")]
    pub message_id: MessageId,
    /// The call id.
    #[serde(rename = "callID")]
    pub call_id: String,
}

/// Where an ask comes from: the asking session, the root of its tree, and the agents between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskOrigin {
    /// The asking session (a child session when a subagent asks).
    pub session_id: SessionId,
    /// The root of the asking session's tree (the asking session itself when it is a root).
    pub root_session_id: SessionId,
    /// Agent names from the root session's agent down to the asking session's agent.
    pub path: Vec<String>,
}

impl AskOrigin {
    /// The origin of an ask raised by `agent` in the root session `session`.
    pub fn root(session: SessionId, agent: impl Into<String>) -> Self {
        AskOrigin {
            root_session_id: session.clone(),
            session_id: session,
            path: vec![agent.into()],
        }
    }
}

/// A pending ask, in OpenCode's `PermissionRequest` shape plus where it comes from
/// (`rootSessionID`, `path`), so that whoever watches a root session can answer its children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PermissionRequest {
    /// The request id.
    pub id: PermissionId,
    /// The asking session (a child session when a subagent asks).
    #[serde(rename = "sessionID")]
    pub session_id: SessionId,
    /// The permission asked for.
    pub permission: String,
    /// The values asked about.
    pub patterns: Vec<String>,
    /// Details for the user.
    pub metadata: Map<String, Value>,
    /// What an "always" reply approves.
    pub always: Vec<String>,
    /// The tool call, when a tool asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolRef>,
    /// The root of the asking session's tree (not in OpenCode).
    #[serde(rename = "rootSessionID")]
    pub root_session_id: SessionId,
    /// Agent names from the root session's agent down to the asking session's (not in OpenCode).
    #[serde(default)]
    pub path: Vec<String>,
}
