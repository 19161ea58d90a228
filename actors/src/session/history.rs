//! The stored conversation as the model sees it.

use serde_json::Value;
use taskforce_agents::id::MessageId;
use taskforce_agents::model::{JsonObject, Message, ModelRef, PartKind, ReasoningPart, ToolState};
use taskforce_agents::provider::{ChatMessage, Content, Role};

use super::part::REASONING_PROVIDER;
use crate::store::MessageWithParts;

/// What an interrupted tool call reads as.
pub(crate) const INTERRUPTED: &str = "[Tool execution was interrupted]";
/// What a user subtask part reads as.
pub(crate) const SUBTASK_BY_USER: &str = "The following tool was executed by the user";
/// What a tool output that was compacted away reads as.
pub(crate) const CLEARED: &str = "[Old tool result content cleared]";
/// What a compaction part reads as.
const COMPACTION: &str = "What did we do so far?";

/// Converts the history for a call to `model`; user text newer than `queued_after` is wrapped as
/// a queued message. Reasoning keeps its provider signature only when `model` produced it.
pub(crate) fn to_model_messages(
    messages: &[MessageWithParts],
    queued_after: Option<&MessageId>,
    model: &ModelRef,
) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(messages.len() * 2);
    for m in messages {
        match &*m.info {
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
                            text: COMPACTION.into(),
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
                let same_model = a.provider_id == model.provider_id && a.model_id == model.model_id;
                let mut content = Vec::new();
                let mut results = Vec::new();
                for p in &m.parts {
                    match &p.kind {
                        PartKind::Reasoning(r) => content.push(Content::Reasoning {
                            text: r.text.clone(),
                            signature: same_model.then(|| signature(r)).flatten(),
                        }),
                        PartKind::Text(t) if !t.text.is_empty() => content.push(Content::Text {
                            text: t.text.clone(),
                        }),
                        PartKind::Tool(tool) => {
                            content.push(Content::ToolCall {
                                id: tool.call_id.clone(),
                                name: tool.tool.clone(),
                                input: Value::Object(JsonObject::clone(tool.state.input())),
                            });
                            let (output, is_error) = match &tool.state {
                                ToolState::Completed(c) if c.time.compacted.is_some() => {
                                    (CLEARED.to_string(), false)
                                }
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
                            // Files a call returned (a fetched image) follow its result; the
                            // adapters put them where their wire format takes them.
                            if let ToolState::Completed(c) = &tool.state
                                && c.time.compacted.is_none()
                            {
                                let files = c.attachments.iter().flatten();
                                results.extend(files.filter_map(|p| match &p.kind {
                                    PartKind::File(f) => Some(Content::File {
                                        mime: f.mime.clone(),
                                        url: f.url.clone(),
                                        filename: f.filename.clone(),
                                    }),
                                    _ => None,
                                }));
                            }
                        }
                        _ => {}
                    }
                }
                // Reasoning alone is no message.
                if content
                    .iter()
                    .any(|c| !matches!(c, Content::Reasoning { .. }))
                {
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

/// Replaces the images and PDFs of `history` by a note the model reads, for a model that takes
/// none (OpenCode's words).
pub(crate) fn without_media(history: &mut [ChatMessage]) {
    for piece in history.iter_mut().flat_map(|m| m.content.iter_mut()) {
        let Content::File { mime, filename, .. } = piece else {
            continue;
        };
        let kind = if mime.starts_with("image/") {
            "image"
        } else if mime == "application/pdf" {
            "pdf"
        } else {
            continue;
        };
        let name = filename.as_deref().unwrap_or(kind);
        *piece = Content::Text {
            text: format!(
                "ERROR: Cannot read {name} (this model does not support {kind} input). Inform the user."
            ),
        };
    }
}

/// The provider signature stored on a reasoning part.
fn signature(r: &ReasoningPart) -> Option<String> {
    r.metadata
        .as_ref()?
        .get(REASONING_PROVIDER)?
        .get("signature")?
        .as_str()
        .map(str::to_string)
}

/// A user message that arrived while the agent was working.
fn queued(text: &str) -> String {
    format!(
        "<system-reminder>\nThe user sent the following message:\n{text}\n\nPlease address this message and continue with your tasks.\n</system-reminder>"
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use taskforce_agents::id::SessionId;
    use taskforce_agents::model::{
        AssistantError, AssistantMessage, CompactionPart, FilePart, MessagePath, Part, PartKind,
        ReasoningPart, StepStartPart, SubtaskPart, TextPart, ToolPart, ToolState,
        ToolStateCompleted, UserMessage,
    };

    use super::*;

    fn session() -> SessionId {
        SessionId::new()
    }

    /// The model the history is converted for (the one `assistant` messages come from).
    fn model() -> ModelRef {
        ModelRef::new("p", "m")
    }

    fn user(session: &SessionId, parts: Vec<PartKind>) -> MessageWithParts {
        let info = UserMessage::new(session.clone(), "build", ModelRef::new("p", "m"), 1);
        let parts = parts
            .into_iter()
            .map(|k| Part::new(session.clone(), info.id.clone(), k).into())
            .collect();
        MessageWithParts {
            info: Arc::new(Message::User(info)),
            parts,
        }
    }

    fn assistant(
        session: &SessionId,
        error: Option<AssistantError>,
        parts: Vec<PartKind>,
    ) -> MessageWithParts {
        let mut info = AssistantMessage::new(
            session.clone(),
            MessageId::new(),
            "build",
            &ModelRef::new("p", "m"),
            MessagePath {
                cwd: "/".into(),
                root: "/".into(),
            },
            2,
        );
        info.error = error;
        let parts = parts
            .into_iter()
            .map(|k| Part::new(session.clone(), info.id.clone(), k).into())
            .collect();
        MessageWithParts {
            info: Arc::new(Message::Assistant(info)),
            parts,
        }
    }

    fn tool(call_id: &str, state: ToolState) -> PartKind {
        let mut part = ToolPart::pending(call_id, "read");
        part.state = state;
        part.into()
    }

    fn input() -> serde_json::Map<String, Value> {
        json!({"filePath": "a.txt"})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    fn results(messages: &[ChatMessage]) -> Vec<(String, bool)> {
        messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|c| match c {
                Content::ToolResult {
                    output, is_error, ..
                } => Some((output.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn interrupted_calls_of_an_aborted_message_read_as_interrupted() {
        let s = session();
        let history = vec![
            user(&s, vec![TextPart::new("read it").into()]),
            assistant(
                &s,
                Some(AssistantError::aborted("The operation was aborted.")),
                vec![
                    StepStartPart::default().into(),
                    tool("a", ToolState::running(input(), 5)),
                    tool("b", ToolState::pending()),
                ],
            ),
        ];
        let out = to_model_messages(&history, None, &model());
        assert_eq!(
            out.iter().map(|m| m.role).collect::<Vec<_>>(),
            [Role::User, Role::Assistant, Role::Tool]
        );
        assert_eq!(
            results(&out),
            [
                (INTERRUPTED.to_string(), true),
                (INTERRUPTED.to_string(), true)
            ]
        );
    }

    #[test]
    fn failed_messages_without_useful_parts_are_skipped() {
        let s = session();
        let history = vec![
            user(&s, vec![TextPart::new("hi").into()]),
            assistant(
                &s,
                Some(AssistantError::aborted("aborted")),
                vec![StepStartPart::default().into()],
            ),
            assistant(
                &s,
                Some(AssistantError::unknown("boom")),
                vec![TextPart::new("half an answer").into()],
            ),
        ];
        let out = to_model_messages(&history, None, &model());
        assert_eq!(out, [ChatMessage::text(Role::User, "hi")]);
    }

    #[test]
    fn a_calls_attachments_follow_its_result_until_compacted() {
        let s = session();
        let image = FilePart {
            mime: "image/png".into(),
            filename: None,
            url: "data:image/png;base64,AAAA".into(),
            source: None,
        };
        let running = taskforce_agents::model::ToolStateRunning::new(input(), 1);
        let mut done = running.complete("Image fetched successfully", "img", 2);
        done.attachments = Some(vec![Part::new(s.clone(), MessageId::new(), image)]);
        let mut compacted = done.clone();
        compacted.time.compacted = Some(3);
        let history = |state: ToolStateCompleted| {
            vec![
                user(&s, vec![TextPart::new("fetch it").into()]),
                assistant(&s, None, vec![tool("a", ToolState::Completed(state))]),
            ]
        };
        let out = to_model_messages(&history(done), None, &model());
        assert_eq!(out[2].role, Role::Tool);
        assert!(matches!(&out[2].content[0], Content::ToolResult { .. }));
        assert_eq!(
            out[2].content[1],
            Content::File {
                mime: "image/png".into(),
                url: "data:image/png;base64,AAAA".into(),
                filename: None,
            }
        );
        let out = to_model_messages(&history(compacted), None, &model());
        assert_eq!(
            out[2].content.len(),
            1,
            "a compacted call's files are gone too"
        );
    }

    #[test]
    fn a_model_without_attachments_reads_a_note_instead_of_media() {
        let file = |mime: &str| Content::File {
            mime: mime.into(),
            url: "data:x;base64,AAAA".into(),
            filename: None,
        };
        let mut history = vec![ChatMessage {
            role: Role::Tool,
            content: vec![
                file("image/png"),
                file("application/pdf"),
                file("text/plain"),
            ],
        }];
        without_media(&mut history);
        assert_eq!(
            history[0].content,
            [
                Content::Text {
                    text: "ERROR: Cannot read image (this model does not support image input). Inform the user.".into()
                },
                Content::Text {
                    text: "ERROR: Cannot read pdf (this model does not support pdf input). Inform the user.".into()
                },
                file("text/plain"),
            ]
        );
    }

    #[test]
    fn compacted_outputs_read_as_cleared() {
        let s = session();
        let running = taskforce_agents::model::ToolStateRunning::new(input(), 1);
        let mut old = running.clone().complete("a very long file", "a.txt", 2);
        old.time.compacted = Some(3);
        let fresh = running.complete("fresh output", "a.txt", 2);
        let history = vec![
            user(&s, vec![TextPart::new("read twice").into()]),
            assistant(
                &s,
                None,
                vec![
                    tool("a", ToolState::Completed(old)),
                    tool("b", ToolState::Completed(fresh)),
                ],
            ),
        ];
        let out = to_model_messages(&history, None, &model());
        assert_eq!(
            results(&out),
            [
                (CLEARED.to_string(), false),
                ("fresh output".to_string(), false)
            ]
        );
        // The call itself keeps its input.
        assert!(matches!(
            &out[1].content[0],
            Content::ToolCall { input, .. } if input["filePath"] == "a.txt"
        ));
    }

    #[test]
    fn subtask_and_compaction_parts_read_as_their_texts() {
        let s = session();
        let subtask = SubtaskPart {
            prompt: "look around".into(),
            description: "explore".into(),
            agent: "explore".into(),
            model: None,
            command: None,
        };
        let history = vec![
            user(&s, vec![subtask.into()]),
            user(&s, vec![CompactionPart { auto: true }.into()]),
        ];
        let out = to_model_messages(&history, None, &model());
        assert_eq!(
            out,
            [
                ChatMessage::text(Role::User, SUBTASK_BY_USER),
                ChatMessage::text(Role::User, COMPACTION),
            ]
        );
    }

    #[test]
    fn queued_user_text_is_wrapped_in_a_system_reminder() {
        let s = session();
        let first = user(&s, vec![TextPart::new("start").into()]);
        let answer = assistant(&s, None, vec![TextPart::new("working").into()]);
        let after = answer.info.id().clone();
        let queued = user(
            &s,
            vec![
                TextPart::new("also do this").into(),
                TextPart::synthetic("synthetic note").into(),
                TextPart::new("  ").into(),
            ],
        );
        let out = to_model_messages(&[first, answer, queued], Some(&after), &model());
        assert_eq!(out[0], ChatMessage::text(Role::User, "start"));
        let texts: Vec<String> = out[2]
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            [
                "<system-reminder>\nThe user sent the following message:\nalso do this\n\nPlease address this message and continue with your tasks.\n</system-reminder>",
                "synthetic note",
                "  ",
            ]
        );
    }

    #[test]
    fn reasoning_keeps_its_signature_only_for_the_same_model() {
        let s = session();
        let mut thought = ReasoningPart::new("thinking hard", 1);
        thought.metadata = json!({"anthropic": {"signature": "sig-1"}})
            .as_object()
            .cloned();
        let history = vec![
            user(&s, vec![TextPart::new("hi").into()]),
            assistant(
                &s,
                None,
                vec![thought.into(), TextPart::new("hello").into()],
            ),
            // Reasoning alone is no message.
            assistant(&s, None, vec![ReasoningPart::new("only this", 1).into()]),
        ];
        let same = to_model_messages(&history, None, &model());
        assert_eq!(same.len(), 2);
        assert_eq!(
            same[1].content[0],
            Content::Reasoning {
                text: "thinking hard".into(),
                signature: Some("sig-1".into())
            }
        );
        let other = to_model_messages(&history, None, &ModelRef::new("p", "other"));
        assert_eq!(
            other[1].content[0],
            Content::Reasoning {
                text: "thinking hard".into(),
                signature: None
            }
        );
    }

    #[test]
    fn ignored_text_and_inlined_files_are_dropped() {
        let s = session();
        let mut ignored = TextPart::new("ignore me");
        ignored.ignored = Some(true);
        let history = vec![user(
            &s,
            vec![
                ignored.into(),
                TextPart::new("keep").into(),
                taskforce_agents::model::FilePart::new("text/plain", "file:///a.txt").into(),
                taskforce_agents::model::FilePart::new("image/png", "data:image/png;base64,AA")
                    .into(),
            ],
        )];
        let out = to_model_messages(&history, None, &model());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].content.len(), 2);
        assert!(matches!(&out[0].content[1], Content::File { mime, .. } if mime == "image/png"));
    }
}
