//! The answer on stdout as it streams: the text of the root session's assistant messages,
//! written piece by piece, each text part ending on a new line, and the final answer made whole
//! at the end of the run.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use taskforce_actors::bus::Event;
use taskforce_actors::store::MessageWithParts;
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, PartKind};

/// What the stream did with one event, for the live view to react to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shown {
    /// A part whose text was already printed was removed (a failed attempt that is retried).
    pub retracted: bool,
}

/// Writes the root session's answer text to `out` as it arrives.
pub struct AnswerStream<W: Write> {
    root: SessionId,
    out: W,
    /// The root session's assistant messages seen so far.
    answers: HashSet<MessageId>,
    /// How much of each text part has been written.
    written: HashMap<PartId, String>,
    /// The text parts that ended (their line is closed).
    ended: HashSet<PartId>,
    /// Whether the last byte written was not a newline.
    open_line: bool,
}

impl<W: Write> AnswerStream<W> {
    /// A stream of the answers of `root` to `out`.
    pub fn new(root: SessionId, out: W) -> Self {
        AnswerStream {
            root,
            out,
            answers: HashSet::new(),
            written: HashMap::new(),
            ended: HashSet::new(),
            open_line: false,
        }
    }

    /// Whether a line of answer text is still open (written without its newline).
    pub fn open_line(&self) -> bool {
        self.open_line
    }

    /// Ends the open line of answer text, if any, so that other output starts on a line of its
    /// own (used when stdout and stderr share a terminal).
    pub fn break_line(&mut self) {
        if self.open_line {
            self.write("\n");
        }
    }

    /// Writes what `event` adds to the answer.
    pub fn show(&mut self, event: &Event) -> Shown {
        match event {
            Event::MessageUpdated { info } => {
                if let Message::Assistant(a) = &**info
                    && a.session_id == self.root
                {
                    self.answers.insert(a.id.clone());
                }
            }
            Event::PartDelta {
                session_id,
                part_id,
                field,
                delta,
                ..
            } if session_id == &self.root && field == "text" => {
                if let Some(written) = self.written.get_mut(part_id)
                    && !self.ended.contains(part_id)
                {
                    written.push_str(delta);
                    self.write(delta);
                }
            }
            Event::PartUpdated { part } if part.session_id == self.root => {
                let PartKind::Text(text) = &part.kind else {
                    return Shown::default();
                };
                if text.synthetic == Some(true) || !self.answers.contains(&part.message_id) {
                    return Shown::default();
                }
                self.catch_up(&part.id, &text.text);
                if text.time.is_some_and(|t| t.end.is_some()) {
                    self.end_part(&part.id);
                }
            }
            Event::PartRemoved {
                session_id,
                part_id,
                ..
            } if session_id == &self.root => {
                let printed = self.written.remove(part_id).is_some_and(|t| !t.is_empty());
                if printed {
                    self.end_part(part_id);
                }
                return Shown { retracted: printed };
            }
            _ => {}
        }
        Shown::default()
    }

    /// Makes sure the whole text of `message` (the final answer) has been written, and that
    /// the output ends with a newline.
    pub fn finish(&mut self, message: &MessageWithParts) {
        let mut any = false;
        for part in &message.parts {
            if let PartKind::Text(text) = &part.kind
                && text.synthetic != Some(true)
            {
                any = true;
                self.catch_up(&part.id, &text.text);
                self.end_part(&part.id);
            }
        }
        if !any && self.written.is_empty() {
            self.write("\n");
        }
        self.break_line();
    }

    /// Writes what `text` (a part's whole text) has beyond what was written of it.
    fn catch_up(&mut self, part: &PartId, text: &str) {
        if self.ended.contains(part) {
            return;
        }
        let written = self.written.entry(part.clone()).or_default();
        // Deltas only append; a text that does not extend what was written is older than it.
        let Some(rest) = text.strip_prefix(written.as_str()) else {
            return;
        };
        if rest.is_empty() {
            return;
        }
        let rest = rest.to_string();
        written.push_str(&rest);
        self.write(&rest);
    }

    /// Closes the line of an ended part.
    fn end_part(&mut self, part: &PartId) {
        if self.ended.insert(part.clone()) {
            self.break_line();
        }
    }

    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        self.open_line = !text.ends_with('\n');
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use taskforce_agents::model::{
        AssistantMessage, MessagePath, ModelRef, Part, PartTime, TextPart,
    };

    fn text_part(session: &SessionId, message: &MessageId, id: &PartId, text: &str) -> Part {
        Part {
            id: id.clone(),
            session_id: session.clone(),
            message_id: message.clone(),
            kind: PartKind::Text(TextPart {
                text: text.into(),
                synthetic: None,
                ignored: None,
                time: Some(PartTime {
                    start: 1,
                    end: None,
                }),
                metadata: None,
            }),
        }
    }

    fn delta(session: &SessionId, message: &MessageId, part: &PartId, text: &str) -> Event {
        Event::PartDelta {
            session_id: session.clone(),
            message_id: message.clone(),
            part_id: part.clone(),
            field: "text".into(),
            delta: text.into(),
        }
    }

    fn assistant(session: &SessionId, message: &MessageId) -> Arc<Message> {
        let path = MessagePath {
            cwd: ".".into(),
            root: ".".into(),
        };
        let model = ModelRef::new("fake", "model");
        let mut info =
            AssistantMessage::new(session.clone(), MessageId::new(), "build", &model, path, 1);
        info.id = message.clone();
        Arc::new(Message::Assistant(info))
    }

    fn answer(session: &SessionId, message: &MessageId) -> Event {
        Event::MessageUpdated {
            info: assistant(session, message),
        }
    }

    #[test]
    fn deltas_are_written_as_they_come_and_the_answer_ends_with_one_newline() {
        let (session, message, part) = (SessionId::new(), MessageId::new(), PartId::new());
        let mut stream = AnswerStream::new(session.clone(), Vec::new());
        stream.show(&answer(&session, &message));
        let started = text_part(&session, &message, &part, "");
        stream.show(&Event::PartUpdated {
            part: Arc::new(started),
        });
        stream.show(&delta(&session, &message, &part, "Hello"));
        assert_eq!(String::from_utf8_lossy(&stream.out), "Hello");
        stream.show(&delta(&session, &message, &part, ", world"));
        // A whole-part update repeating what the deltas wrote adds nothing.
        let mut middle = text_part(&session, &message, &part, "Hello, world");
        stream.show(&Event::PartUpdated {
            part: Arc::new(middle.clone()),
        });
        if let PartKind::Text(t) = &mut middle.kind {
            t.text.push('!');
            t.time = Some(PartTime {
                start: 1,
                end: Some(2),
            });
        }
        stream.show(&Event::PartUpdated {
            part: Arc::new(middle.clone()),
        });
        stream.finish(&MessageWithParts {
            info: assistant(&session, &message),
            parts: vec![Arc::new(middle)],
        });
        assert_eq!(String::from_utf8_lossy(&stream.out), "Hello, world!\n");
    }

    #[test]
    fn other_sessions_and_the_users_text_are_not_written() {
        let (session, message, part) = (SessionId::new(), MessageId::new(), PartId::new());
        let child = SessionId::new();
        let mut stream = AnswerStream::new(session.clone(), Vec::new());
        // The user's message: never announced as an assistant message.
        stream.show(&Event::PartUpdated {
            part: Arc::new(text_part(&session, &message, &part, "the question")),
        });
        stream.show(&delta(&session, &message, &part, " more"));
        stream.show(&answer(&child, &message));
        stream.show(&Event::PartUpdated {
            part: Arc::new(text_part(&child, &message, &part, "child text")),
        });
        assert!(
            stream.out.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&stream.out)
        );
    }

    #[test]
    fn a_removed_part_that_was_written_is_reported() {
        let (session, message, part) = (SessionId::new(), MessageId::new(), PartId::new());
        let mut stream = AnswerStream::new(session.clone(), Vec::new());
        stream.show(&answer(&session, &message));
        stream.show(&Event::PartUpdated {
            part: Arc::new(text_part(&session, &message, &part, "half an ans")),
        });
        let shown = stream.show(&Event::PartRemoved {
            session_id: session.clone(),
            message_id: message.clone(),
            part_id: part.clone(),
        });
        assert!(shown.retracted);
        assert_eq!(String::from_utf8_lossy(&stream.out), "half an ans\n");
    }
}
