//! The events the bus carries, in OpenCode's `{type, properties}` shape.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use taskforce_agents::id::{MessageId, PartId, PermissionId, QuestionId, SessionId};
use taskforce_agents::model::{AssistantError, Message, Part, Session, Todo};

use taskforce_agents::permission::{PermissionReply, PermissionRequest};
use taskforce_agents::question::QuestionRequest;

/// A session's activity: idle, busy, or waiting to retry a model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SessionStatus {
    /// Nothing running.
    Idle,
    /// The agent loop is running.
    Busy,
    /// Waiting before retrying a failed model call.
    Retry {
        /// Which attempt comes next.
        attempt: u32,
        /// Why the call failed.
        message: String,
        /// When the next attempt starts (epoch ms).
        next: u64,
    },
}

/// One state change, published once.
// Large payloads are behind a pointer, so that an event is small to move and to allocate (a
// cancelled tree publishes thousands at once); sessions and messages are shared, so that an
// event and its copies for every subscriber cost a reference count, not a deep copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", content = "properties")]
pub enum Event {
    /// A session was created.
    #[serde(rename = "session.created")]
    SessionCreated {
        /// The new session.
        #[cfg_attr(feature = "openapi", schema(value_type = Session))]
        info: Arc<Session>,
    },
    /// A session changed.
    #[serde(rename = "session.updated")]
    SessionUpdated {
        /// The session as it is now.
        #[cfg_attr(feature = "openapi", schema(value_type = Session))]
        info: Arc<Session>,
    },
    /// A session was deleted.
    #[serde(rename = "session.deleted")]
    SessionDeleted {
        /// The session as it was.
        #[cfg_attr(feature = "openapi", schema(value_type = Session))]
        info: Arc<Session>,
    },
    /// A session's activity changed.
    #[serde(rename = "session.status")]
    SessionStatus {
        /// The session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// Its new status.
        status: SessionStatus,
    },
    /// A session went idle (always right after the matching `session.status`).
    #[serde(rename = "session.idle")]
    SessionIdle {
        /// The session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
    },
    /// A session's history was compacted into a summary.
    #[serde(rename = "session.compacted")]
    SessionCompacted {
        /// The session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
    },
    /// A session's loop failed.
    #[serde(rename = "session.error")]
    SessionError {
        /// The session, when the error belongs to one.
        #[serde(rename = "sessionID", default, skip_serializing_if = "Option::is_none")]
        session_id: Option<SessionId>,
        /// The error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "openapi", schema(value_type = Option<AssistantError>))]
        error: Option<Box<AssistantError>>,
    },
    /// A message was created or changed.
    #[serde(rename = "message.updated")]
    MessageUpdated {
        /// The message as it is now.
        #[cfg_attr(feature = "openapi", schema(value_type = Message))]
        info: Arc<Message>,
    },
    /// A message was removed.
    #[serde(rename = "message.removed")]
    MessageRemoved {
        /// Its session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// The message.
        #[serde(rename = "messageID")]
        message_id: MessageId,
    },
    /// A part was created or changed. A streaming text or reasoning part is published whole
    /// when it starts, when it ends and at most every 100 ms between; its text grows by
    /// `message.part.delta` events in between.
    #[serde(rename = "message.part.updated")]
    PartUpdated {
        /// The part as it is now.
        #[cfg_attr(feature = "openapi", schema(value_type = Part))]
        part: Arc<Part>,
    },
    /// Text was appended to a field of a streaming part.
    #[serde(rename = "message.part.delta")]
    PartDelta {
        /// Its session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// Its message.
        #[serde(rename = "messageID")]
        message_id: MessageId,
        /// The part.
        #[serde(rename = "partID")]
        part_id: PartId,
        /// The field that grew: `text` for text and reasoning parts.
        field: String,
        /// The text appended to it.
        delta: String,
    },
    /// A part was removed.
    #[serde(rename = "message.part.removed")]
    PartRemoved {
        /// Its session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// Its message.
        #[serde(rename = "messageID")]
        message_id: MessageId,
        /// The part.
        #[serde(rename = "partID")]
        part_id: PartId,
    },
    /// A tool asks the user for permission.
    #[serde(rename = "permission.asked")]
    PermissionAsked(Box<PermissionRequest>),
    /// A permission ask was answered.
    #[serde(rename = "permission.replied")]
    PermissionReplied {
        /// The asking session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// The ask.
        #[serde(rename = "requestID")]
        request_id: PermissionId,
        /// The answer.
        reply: PermissionReply,
    },
    /// A slash command ran.
    #[serde(rename = "command.executed")]
    CommandExecuted {
        /// The command.
        name: String,
        /// The session it ran in.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// Its arguments as typed.
        arguments: String,
        /// The answer's message.
        #[serde(rename = "messageID")]
        message_id: MessageId,
    },
    /// The files a session's turns changed (or, after an undo, the undone turns changed).
    #[serde(rename = "session.diff")]
    SessionDiff {
        /// The session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// Each changed file.
        diff: Vec<taskforce_agents::model::FileDiff>,
    },
    /// Text for the TUI's prompt (sent by an editor plugin or a script).
    #[serde(rename = "tui.prompt.append")]
    TuiPromptAppend {
        /// The text to add.
        text: String,
    },
    /// A command for the TUI to run (`prompt.submit`, `session.new`, …).
    #[serde(rename = "tui.command.execute")]
    TuiCommandExecute {
        /// The command's name.
        command: String,
    },
    /// A toast for the TUI to show.
    #[serde(rename = "tui.toast.show")]
    TuiToastShow {
        /// Its title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Its text.
        message: String,
        /// `info`, `success`, `warning` or `error`.
        variant: ToastVariant,
        /// How long it shows, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration: Option<u64>,
    },
    /// A session for the TUI to open.
    #[serde(rename = "tui.session.select")]
    TuiSessionSelect {
        /// The session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
    },
    /// A subagent or agent asks the user questions.
    #[serde(rename = "question.asked")]
    QuestionAsked(Box<QuestionRequest>),
    /// Questions were answered.
    #[serde(rename = "question.replied")]
    QuestionReplied {
        /// The asking session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// The request answered.
        #[serde(rename = "requestID")]
        request_id: QuestionId,
        /// The labels picked, one list per question.
        answers: Vec<Vec<String>>,
    },
    /// Questions were dismissed.
    #[serde(rename = "question.rejected")]
    QuestionRejected {
        /// The asking session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// The request dismissed.
        #[serde(rename = "requestID")]
        request_id: QuestionId,
    },
    /// The tools an MCP server offers changed: it connected, stopped, or said its list changed.
    #[serde(rename = "mcp.tools.changed")]
    McpToolsChanged {
        /// The server's name.
        server: String,
    },
    /// A session's todo list changed.
    #[serde(rename = "todo.updated")]
    TodoUpdated {
        /// The session.
        #[serde(rename = "sessionID")]
        session_id: SessionId,
        /// The whole list.
        todos: Vec<Todo>,
    },
}

/// How a TUI toast looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ToastVariant {
    /// News.
    Info,
    /// Something worked.
    Success,
    /// Something to look at.
    Warning,
    /// Something failed.
    Error,
}

impl Event {
    /// The session the event belongs to, when it belongs to one.
    pub fn session_id(&self) -> Option<&SessionId> {
        match self {
            Event::SessionCreated { info }
            | Event::SessionUpdated { info }
            | Event::SessionDeleted { info } => Some(&info.id),
            Event::SessionStatus { session_id, .. }
            | Event::SessionIdle { session_id }
            | Event::SessionCompacted { session_id }
            | Event::MessageRemoved { session_id, .. }
            | Event::PartRemoved { session_id, .. }
            | Event::PartDelta { session_id, .. }
            | Event::PermissionReplied { session_id, .. }
            | Event::TodoUpdated { session_id, .. }
            | Event::SessionDiff { session_id, .. }
            | Event::CommandExecuted { session_id, .. } => Some(session_id),
            Event::SessionError { session_id, .. } => session_id.as_ref(),
            // Meant for every TUI attached, whichever session it shows.
            Event::TuiPromptAppend { .. }
            | Event::TuiCommandExecute { .. }
            | Event::TuiToastShow { .. }
            | Event::TuiSessionSelect { .. } => None,
            Event::McpToolsChanged { .. } => None,
            Event::MessageUpdated { info } => Some(info.session_id()),
            Event::PartUpdated { part, .. } => Some(&part.session_id),
            Event::PermissionAsked(request) => Some(&request.session_id),
            Event::QuestionAsked(request) => Some(&request.session_id),
            Event::QuestionReplied { session_id, .. }
            | Event::QuestionRejected { session_id, .. } => Some(session_id),
        }
    }

    /// The event's `type` name, as in `message.part.updated`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::SessionCreated { .. } => "session.created",
            Event::SessionUpdated { .. } => "session.updated",
            Event::SessionDeleted { .. } => "session.deleted",
            Event::SessionStatus { .. } => "session.status",
            Event::SessionIdle { .. } => "session.idle",
            Event::SessionCompacted { .. } => "session.compacted",
            Event::SessionError { .. } => "session.error",
            Event::MessageUpdated { .. } => "message.updated",
            Event::MessageRemoved { .. } => "message.removed",
            Event::PartUpdated { .. } => "message.part.updated",
            Event::PartDelta { .. } => "message.part.delta",
            Event::PartRemoved { .. } => "message.part.removed",
            Event::PermissionAsked(_) => "permission.asked",
            Event::PermissionReplied { .. } => "permission.replied",
            Event::TodoUpdated { .. } => "todo.updated",
            Event::QuestionAsked(_) => "question.asked",
            Event::QuestionReplied { .. } => "question.replied",
            Event::QuestionRejected { .. } => "question.rejected",
            Event::SessionDiff { .. } => "session.diff",
            Event::TuiPromptAppend { .. } => "tui.prompt.append",
            Event::TuiCommandExecute { .. } => "tui.command.execute",
            Event::TuiToastShow { .. } => "tui.toast.show",
            Event::TuiSessionSelect { .. } => "tui.session.select",
            Event::CommandExecuted { .. } => "command.executed",
            Event::McpToolsChanged { .. } => "mcp.tools.changed",
        }
    }
}
