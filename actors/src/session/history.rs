//! The stored conversation as the model sees it (reference §8.11).

use serde_json::Value;
use taskforce_agents::id::MessageId;
use taskforce_agents::model::{Message, PartKind, ToolState};
use taskforce_agents::provider::{ChatMessage, Content, Role};

use crate::store::MessageWithParts;

/// What an interrupted tool call reads as.
pub const INTERRUPTED: &str = "[Tool execution was interrupted]";
/// What a user subtask part reads as.
pub const SUBTASK_BY_USER: &str = "The following tool was executed by the user";

/// Converts the history; user text newer than `queued_after` is wrapped as a queued message.
pub(crate) fn to_model_messages(
    messages: &[MessageWithParts],
    queued_after: Option<&MessageId>,
) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(messages.len() * 2);
    for m in messages {
        match &m.info {
            Message::User(user) => {
                let wrap = queued_after.is_some_and(|after| &user.id > after);
                let content: Vec<Content> = m
                    .parts
                    .iter()
                    .filter_map(|p| match &p.kind {
                        PartKind::Text(t) if t.ignored != Some(true) => {
                            let synthetic = t.synthetic == Some(true);
                            Some(Content::Text {
                                text: if wrap && !synthetic && !t.text.trim().is_empty() {
                                    queued(&t.text)
                                } else {
                                    t.text.clone()
                                },
                            })
                        }
                        PartKind::File(f)
                            if f.mime != "text/plain" && f.mime != "application/x-directory" =>
                        {
                            Some(Content::File {
                                mime: f.mime.clone(),
                                url: f.url.clone(),
                                filename: f.filename.clone(),
                            })
                        }
                        PartKind::Subtask(_) => Some(Content::Text {
                            text: SUBTASK_BY_USER.into(),
                        }),
                        PartKind::Compaction(_) => Some(Content::Text {
                            text: "What did we do so far?".into(),
                        }),
                        _ => None,
                    })
                    .collect();
                if !content.is_empty() {
                    out.push(ChatMessage {
                        role: Role::User,
                        content,
                    });
                }
            }
            Message::Assistant(a) => {
                let aborted = a
                    .error
                    .as_ref()
                    .is_some_and(|e| e.name() == "MessageAbortedError");
                let useful = m
                    .parts
                    .iter()
                    .any(|p| !matches!(p.kind, PartKind::StepStart(_) | PartKind::Reasoning(_)));
                if a.error.is_some() && !(aborted && useful) {
                    continue;
                }
                let mut content = Vec::new();
                let mut results = Vec::new();
                for p in &m.parts {
                    match &p.kind {
                        PartKind::Text(t) if !t.text.is_empty() => content.push(Content::Text {
                            text: t.text.clone(),
                        }),
                        PartKind::Tool(tool) => {
                            content.push(Content::ToolCall {
                                id: tool.call_id.clone(),
                                name: tool.tool.clone(),
                                input: Value::Object(tool.state.input().clone()),
                            });
                            let (output, is_error) = match &tool.state {
                                ToolState::Completed(c) => (c.output.clone(), false),
                                ToolState::Error(e) => (e.error.clone(), true),
                                ToolState::Pending(_) | ToolState::Running(_) => {
                                    (INTERRUPTED.to_string(), true)
                                }
                            };
                            results.push(Content::ToolResult {
                                call_id: tool.call_id.clone(),
                                name: tool.tool.clone(),
                                output,
                                is_error,
                            });
                        }
                        _ => {}
                    }
                }
                if !content.is_empty() {
                    out.push(ChatMessage {
                        role: Role::Assistant,
                        content,
                    });
                }
                if !results.is_empty() {
                    out.push(ChatMessage {
                        role: Role::Tool,
                        content: results,
                    });
                }
            }
        }
    }
    out
}

/// A user message that arrived while the agent was working (reference F22).
fn queued(text: &str) -> String {
    format!(
        "<system-reminder>\nThe user sent the following message:\n{text}\n\nPlease address this message and continue with your tasks.\n</system-reminder>"
    )
}
