//! A text or reasoning part while the model streams it: every piece goes out at once as a
//! `message.part.delta`, the whole part when it starts, when it ends and at most every
//! [`PUBLISH_EVERY`] between (clients that draw from whole parts stay current), and it is
//! written to disk at most every `flush_every`.
//!
//! The whole part is copied only when it is published and a later piece arrives while a reader
//! still holds the published state, so a long reply keeps a handful of copies of its text, not
//! one per piece.

use std::time::Duration;

use taskforce_agents::id::now_ms;
use taskforce_agents::model::{Part, PartKind, PartTime, ReasoningPart, TextPart};
use tokio::time::Instant;

use super::part::SharedPart;
use super::writer::Writer;
use crate::bus::Event;
use crate::core::Core;

/// The longest time a streaming part's published whole state lags its text.
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The field a text or reasoning part's deltas extend.
const TEXT_FIELD: &str = "text";

/// Appends `delta` to a streaming text. Room grows by an eighth of the text rather than by
/// doubling: the text is copied at each whole publication (a reader still holds the published
/// state) and then grows again, so doubling would keep every copy twice as large as its text.
fn append(text: &mut String, delta: &str) {
    if text.capacity() - text.len() < delta.len() {
        text.reserve_exact(delta.len().max(text.len() / 8));
    }
    text.push_str(delta);
}

/// A streaming text or reasoning part, when it was last written and last published whole.
pub(super) struct Streaming {
    pub part: SharedPart,
    flushed: Instant,
    /// Changed since it was last written.
    dirty: bool,
    published: Instant,
    /// Changed since it was last published whole.
    stale: bool,
}

impl Streaming {
    /// Starts a part (reasoning or text) with no text yet and publishes it whole; it is written
    /// at the first flush or at its end, whichever comes first.
    pub fn start(part: SharedPart, writer: &Writer) -> Streaming {
        writer.part_live(part.lock());
        let now = Instant::now();
        Streaming {
            part,
            flushed: now,
            dirty: false,
            published: now,
            stale: false,
        }
    }

    /// The empty part a stream of text (or of reasoning) starts.
    pub fn empty_kind(is_reasoning: bool) -> PartKind {
        if is_reasoning {
            ReasoningPart::new(String::new(), now_ms()).into()
        } else {
            let mut t = TextPart::new(String::new());
            t.time = Some(PartTime {
                start: now_ms(),
                end: None,
            });
            t.into()
        }
    }

    /// Appends `delta`: published at once as a delta, the whole part when its last whole
    /// publication is [`PUBLISH_EVERY`] old, and written when its last write is
    /// `core.flush_every` old.
    pub fn push(&mut self, delta: String, core: &Core, writer: &Writer) {
        let part = self.part.update(|p| match &mut p.kind {
            PartKind::Text(t) => append(&mut t.text, &delta),
            PartKind::Reasoning(r) => append(&mut r.text, &delta),
            _ => {}
        });
        if self.flushed.elapsed() >= core.flush_every {
            writer.queue_part(part.clone());
            self.flushed = Instant::now();
            self.dirty = false;
        } else {
            self.dirty = true;
        }
        writer.publish_event(Event::PartDelta {
            session_id: part.session_id.clone(),
            message_id: part.message_id.clone(),
            part_id: part.id.clone(),
            field: TEXT_FIELD.to_string(),
            delta,
        });
        if self.published.elapsed() >= PUBLISH_EVERY {
            self.publish(part, writer);
        } else {
            self.stale = true;
        }
    }

    fn publish(&mut self, part: std::sync::Arc<Part>, writer: &Writer) {
        writer.part_live(part);
        self.published = Instant::now();
        self.stale = false;
    }

    /// When the part is next due on disk or on the bus whole, if it has changes for either.
    pub fn due(slot: &Option<Streaming>, flush_every: Duration) -> Option<Instant> {
        let s = slot.as_ref()?;
        let flush = s.dirty.then(|| s.flushed + flush_every);
        let publish = s.stale.then(|| s.published + PUBLISH_EVERY);
        flush.into_iter().chain(publish).min()
    }

    /// Writes and publishes what is due (a stream that pauses still gets its text on disk and
    /// to the clients drawing whole parts).
    pub fn catch_up(slot: &mut Option<Streaming>, core: &Core, writer: &Writer) {
        let Some(s) = slot else {
            return;
        };
        if s.dirty && s.flushed.elapsed() >= core.flush_every {
            writer.queue_part(s.part.lock());
            s.flushed = Instant::now();
            s.dirty = false;
        }
        if s.stale && s.published.elapsed() >= PUBLISH_EVERY {
            let part = s.part.lock();
            s.publish(part, writer);
        }
    }

    /// Ends a streaming part: trailing whitespace trimmed, end time set; the caller writes and
    /// publishes it.
    pub fn end(slot: Option<Streaming>) -> Option<std::sync::Arc<Part>> {
        let streaming = slot?;
        let part = streaming.part.update(|p| match &mut p.kind {
            PartKind::Text(t) => {
                t.text.truncate(t.text.trim_end().len());
                if let Some(time) = &mut t.time {
                    time.end = Some(now_ms());
                }
            }
            PartKind::Reasoning(r) => r.time.end = Some(now_ms()),
            _ => {}
        });
        Some(part)
    }
}
