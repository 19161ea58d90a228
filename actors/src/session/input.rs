//! What a prompt carries, and turning it into a stored user message.

use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use taskforce_agents::command::{
    PromptPiece, Reference, attachment_pieces, file_pieces, find_references,
};
use taskforce_agents::id::{MessageId, now_ms};
use taskforce_agents::model::{
    AgentPart, CompactionPart, FilePart, Message, ModelRef, Part, PartKind, Session, SubtaskPart,
    TextPart, UserMessage,
};
use taskforce_agents::permission::{Action, evaluate};

use super::writer::{Held, Writer};
use crate::RuntimeError;
use crate::core::Core;
use crate::store::MessageWithParts;

/// One part of a prompt, in OpenCode's `PromptInput.parts` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PartInput {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// Written by taskforce rather than the user.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        synthetic: bool,
    },
    /// An `@agent` mention: the model is told to hand the work to that subagent.
    Agent {
        /// The agent's name.
        name: String,
    },
    /// A subagent task to run as it is (a command's subtask, or a client's).
    Subtask {
        /// The task for the subagent.
        prompt: String,
        /// A short description of the task.
        description: String,
        /// The subagent.
        agent: String,
        /// The model it runs on (else the subagent's own, else the session's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<ModelRef>,
        /// The command that made it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
    },
    /// A request to summarize the conversation so far (`POST /session/:id/summarize`).
    Compaction {
        /// Whether the runtime asked for it (context overflow) rather than the user.
        #[serde(default)]
        auto: bool,
    },
    /// A file given by URL (`file://` or `data:`).
    File {
        /// The MIME type.
        mime: String,
        /// The URL.
        url: String,
        /// The file name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
}

impl PartInput {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        PartInput::Text {
            text: text.into(),
            synthetic: false,
        }
    }
}

/// A piece of a referenced file (the read tool's call and output, then the file itself).
impl From<PromptPiece> for PartInput {
    fn from(piece: PromptPiece) -> Self {
        match piece {
            PromptPiece::Text { text, synthetic } => PartInput::Text { text, synthetic },
            PromptPiece::File {
                mime,
                url,
                filename,
            } => PartInput::File {
                mime,
                url,
                filename: Some(filename),
            },
        }
    }
}

/// The parts of a prompt text: the text itself, then for each `@reference` the file's contents
/// as the read tool shows them, a directory's listing, or an agent mention (names `is_agent`
/// accepts). Paths resolve against `directory` (`~` against `home`) and are read here.
pub async fn prompt_parts(
    text: &str,
    directory: &Path,
    home: Option<&Path>,
    is_agent: impl Fn(&str) -> bool,
) -> Vec<PartInput> {
    let references = find_references(text, directory, home, is_agent);
    let mut parts = vec![PartInput::text(text)];
    for reference in &references {
        if let Reference::Agent(name) = reference {
            parts.push(PartInput::Agent { name: name.clone() });
            continue;
        }
        for piece in file_pieces(reference, directory).await {
            parts.push(piece.into());
        }
    }
    parts
}

/// A prompt: its parts and, optionally, the agent and model that answer it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PromptInput {
    /// The message's parts.
    pub parts: Vec<PartInput>,
    /// The agent; when absent, the agent a child session was started for, else the default
    /// agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model; the agent's, else the session's last, else the configured default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// Tools switched on or off for this prompt (`false` hides a tool from the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<IndexMap<String, bool>>,
    /// Extra system prompt for this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The id the user message gets (a client-chosen `msg_…`); a new one when absent.
    #[serde(rename = "messageID", default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    /// Store the message without running the agent loop.
    #[serde(
        rename = "noReply",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub no_reply: bool,
}

impl PromptInput {
    /// A prompt of one text part.
    pub fn text(text: impl Into<String>) -> Self {
        PromptInput {
            parts: vec![PartInput::text(text)],
            ..Default::default()
        }
    }

    /// The same prompt answered by `agent`.
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The same prompt answered by `model`.
    pub fn with_model(mut self, model: ModelRef) -> Self {
        self.model = Some(model);
        self
    }
}

/// Writes the user message of `input` to `session` and publishes it; resolves agent and model.
/// `history` is the session's messages when the caller has them (else they are read when
/// needed); `unsaved` is set when the session itself is not stored yet and goes in the same save.
pub(crate) async fn create_user_message(
    core: &Core,
    writer: &Writer,
    session: &Arc<Session>,
    history: Option<&[MessageWithParts]>,
    unsaved: bool,
    input: PromptInput,
) -> Result<MessageWithParts, RuntimeError> {
    let mut held = Held::default();
    let user = hold_user_message(core, &mut held, session, history, unsaved, input).await?;
    writer.flush(&mut held).await?;
    Ok(user)
}

/// The user message of `input` as [`create_user_message`] makes it, held to be written (and
/// published) with the next commit, the session's own row first when `unsaved`.
pub(crate) async fn hold_user_message(
    core: &Core,
    held: &mut Held,
    session: &Arc<Session>,
    history: Option<&[MessageWithParts]>,
    unsaved: bool,
    input: PromptInput,
) -> Result<MessageWithParts, RuntimeError> {
    let user = user_message(core, session, history, input).await?;
    if unsaved {
        // Stored with its first message: its time is the message's already (no touch follows).
        let at = user.info.created();
        if session.time.updated < at {
            let mut moved = (**session).clone();
            moved.time.updated = at;
            held.session(Arc::new(moved));
        } else {
            held.session(session.clone());
        }
    }
    held.message(user.info.clone());
    held.parts(user.parts.iter().cloned());
    Ok(user)
}

/// A prompt's file parts that a client attached, expanded into what the model reads (see
/// `attachment_pieces`); a file part that follows the synthetic read note made for it (by an
/// `@path` reference or `run -f`) stays as it is.
async fn expand_attachments(parts: Vec<PartInput>) -> Vec<PartInput> {
    let mut out: Vec<PartInput> = Vec::with_capacity(parts.len());
    for part in parts {
        let PartInput::File {
            mime,
            url,
            filename,
        } = &part
        else {
            out.push(part);
            continue;
        };
        let named = url
            .strip_prefix("file://")
            .map(taskforce_agents::model::data_url::percent_decode)
            .or_else(|| filename.clone())
            .map(|n| serde_json::to_string(&n).unwrap_or_default());
        let covered = named.is_some_and(|quoted| {
            out.iter().any(|p| {
                matches!(p, PartInput::Text { text, synthetic: true }
                    if text.starts_with("Called the ") && text.contains(&quoted))
            })
        });
        if covered {
            out.push(part);
            continue;
        }
        match attachment_pieces(mime, url, filename.as_deref()).await {
            Some(pieces) => out.extend(pieces.into_iter().map(PartInput::from)),
            None => out.push(part),
        }
    }
    out
}

/// The user message of `input` to `session`, with its agent and model resolved.
async fn user_message(
    core: &Core,
    session: &Session,
    history: Option<&[MessageWithParts]>,
    input: PromptInput,
) -> Result<MessageWithParts, RuntimeError> {
    let agent = match &input.agent {
        Some(name) => core.registry.require(name)?,
        None => match recorded_agent(core, session, history).await? {
            Some(name) => core.registry.require(&name)?,
            None => core.registry.default_agent(),
        },
    };
    let model = match input.model.clone().or_else(|| agent.model.clone()) {
        Some(m) => m,
        None => match last_model(core, session, history).await? {
            Some(m) => m,
            None => core.config.model.clone().ok_or_else(|| {
                RuntimeError::InvalidInput(
                    "no model configured: set `model = \"provider/model\"` in taskforce.toml or TASKFORCE_MODEL"
                        .into(),
                )
            })?,
        },
    };
    let mut user = UserMessage::new(session.id.clone(), agent.name.clone(), model, now_ms());
    if let Some(id) = input.message_id {
        user.id = id;
    }
    user.tools = input.tools;
    user.system = input.system;
    let info = Arc::new(Message::User(user));
    let input_parts = expand_attachments(input.parts).await;
    let mut parts = Vec::with_capacity(input_parts.len());
    for p in input_parts {
        let kind: PartKind = match p {
            PartInput::Text { text, synthetic } => {
                let mut t = TextPart::new(text);
                if synthetic {
                    t.synthetic = Some(true);
                }
                t.into()
            }
            PartInput::File {
                mime,
                url,
                filename,
            } => {
                let mut f = FilePart::new(mime, url);
                f.filename = filename;
                f.into()
            }
            PartInput::Agent { name } => {
                parts.push(Arc::new(Part::new(
                    session.id.clone(),
                    info.id().clone(),
                    AgentPart {
                        name: name.clone(),
                        source: None,
                    },
                )));
                // An `@agent` mention: the model is told to delegate; a denied agent is vouched for by the user.
                let denied = evaluate("task", &name, &[&agent.permission]).action == Action::Deny;
                let mut hint = format!(
                    " Use the above message and context to generate a prompt and call the task tool with subagent: {name}"
                );
                if denied {
                    hint.push_str(" . Invoked by user; guaranteed to exist.");
                }
                TextPart::synthetic(hint).into()
            }
            PartInput::Compaction { auto } => CompactionPart { auto }.into(),
            PartInput::Subtask {
                prompt,
                description,
                agent,
                model,
                command,
            } => SubtaskPart {
                prompt,
                description,
                agent,
                model,
                command,
            }
            .into(),
        };
        parts.push(Arc::new(Part::new(
            session.id.clone(),
            info.id().clone(),
            kind,
        )));
    }
    Ok(MessageWithParts { info, parts })
}

/// The agent a child session runs when a prompt names none: the one it was started for, else
/// (a child stored before that was recorded) the agent of its first prompt. `None` for a root
/// session, which runs the default agent.
async fn recorded_agent(
    core: &Core,
    session: &Session,
    history: Option<&[MessageWithParts]>,
) -> Result<Option<String>, RuntimeError> {
    if let Some(agent) = &session.agent {
        return Ok(Some(agent.clone()));
    }
    if session.is_root() {
        return Ok(None);
    }
    let read;
    let messages = match history {
        Some(h) => h,
        None => {
            read = core.store.messages(&session.id).await?;
            &read
        }
    };
    Ok(messages.iter().find_map(|m| match &*m.info {
        Message::User(u) => Some(u.agent.clone()),
        Message::Assistant(_) => None,
    }))
}

/// The model of the session's most recent user message.
async fn last_model(
    core: &Core,
    session: &Session,
    history: Option<&[MessageWithParts]>,
) -> Result<Option<ModelRef>, RuntimeError> {
    let read;
    let messages = match history {
        Some(h) => h,
        None => {
            read = core.store.messages(&session.id).await?;
            &read
        }
    };
    Ok(messages.iter().rev().find_map(|m| match &*m.info {
        Message::User(u) => Some(u.model.clone()),
        Message::Assistant(_) => None,
    }))
}
