//! Writing the session's state: to the store first, then to the bus.

use std::sync::Arc;

use taskforce_agents::model::{Message, Part, Session};

use super::release::{HandedOver, Release, Saved};
use crate::bus::{Event, SessionStatus};
use crate::core::Core;
use crate::store::StoreError;

/// Something to save.
#[derive(Clone, Copy)]
pub(crate) enum Item<'a> {
    /// A message, published as the shared copy it is.
    Message(&'a Arc<Message>),
    Part(&'a Arc<Part>),
}

/// Final states kept back to go with the next commit instead of one of their own: a prompt's
/// user message and a step's closing state, written with the next step's opening (a delegated
/// prompt commits 5 times instead of 9). Nothing held is published before it is on disk; what
/// no commit follows is written by [`Writer::flush`].
#[derive(Default)]
pub(crate) struct Held(Vec<Saved>);

impl Held {
    /// Holds a session stored for the first time.
    pub fn session(&mut self, session: Arc<Session>) {
        self.0.push(Saved::NewSession(session));
    }

    /// Holds a message.
    pub fn message(&mut self, message: Arc<Message>) {
        self.0.push(Saved::Message(message));
    }

    /// Holds parts, in order.
    pub fn parts(&mut self, parts: impl IntoIterator<Item = Arc<Part>>) {
        self.0.extend(parts.into_iter().map(Saved::Part));
    }
}

/// Persists and publishes messages, parts and status of sessions, in one order per writer (see
/// `release.rs`): its clones share the order.
#[derive(Clone)]
pub(crate) struct Writer {
    core: Arc<Core>,
    release: Arc<Release>,
}

impl Writer {
    pub fn new(core: Arc<Core>) -> Self {
        Writer {
            release: Arc::new(Release::new(core.clone())),
            core,
        }
    }

    /// Stores several messages and parts in one go, then publishes them in order: all are on
    /// disk before any event goes out; returns once they are (and what was queued before).
    pub async fn save(&self, items: &[Item<'_>]) -> Result<(), StoreError> {
        self.save_later(items);
        self.settle().await
    }

    /// Like [`save`](Self::save) without waiting: the commit and the events follow in the
    /// background, in order; a failure is reported by the next [`settle`](Self::settle).
    pub fn save_later(&self, items: &[Item<'_>]) {
        self.release.save(items.iter().map(owned).collect());
    }

    /// Like [`save_later`](Self::save_later) for what `held` holds, then `items`, in one
    /// commit; `held` is emptied.
    pub fn save_later_after(&self, held: &mut Held, items: &[Item<'_>]) {
        let mut rows = std::mem::take(&mut held.0);
        rows.extend(items.iter().map(owned));
        self.release.save(rows);
    }

    /// Stores and publishes what `held` holds (when no commit of its own follows), and waits
    /// for everything queued.
    pub async fn flush(&self, held: &mut Held) -> Result<(), StoreError> {
        self.flush_later(held);
        self.settle().await
    }

    /// Queues what `held` holds, without waiting.
    pub fn flush_later(&self, held: &mut Held) {
        self.release.save(std::mem::take(&mut held.0));
    }

    /// Returns once everything queued is on disk and published; answers the first failed
    /// commit of this writer, if one failed.
    pub async fn settle(&self) -> Result<(), StoreError> {
        self.release.settle().await
    }

    /// Hands what is queued to the store without waiting for the saves before it (see
    /// `Release::hand_over`): reads of the session wait for it, later writes land after it,
    /// and its events still follow its commit.
    pub fn hand_over(&self) -> Option<HandedOver> {
        self.release.hand_over()
    }

    /// Whether a session's first row is queued and not yet committed.
    pub fn stores_a_session(&self) -> bool {
        self.release.stores_a_session()
    }

    /// The first commit of this writer that failed so far (without waiting for any).
    pub fn failure(&self) -> Option<StoreError> {
        self.release.failure()
    }

    /// Queues messages and parts to be stored in one go and publishes them at once: for the
    /// end of a cancelled run, which must not wait for the disk (nor spend its time encoding:
    /// the store's writer does that). Reads of the session wait for the queued write, so nobody
    /// who heard of the state reads an older one. Parts are published before the messages.
    /// Behind saves still committing, it takes its turn after them.
    pub fn save_behind(&self, messages: Vec<Arc<Message>>, parts: Vec<Arc<Part>>) {
        self.release.save_behind(messages, parts);
    }

    /// Stores a part, then publishes `message.part.updated` (the part is on disk first).
    pub async fn part(&self, part: &Arc<Part>) -> Result<(), StoreError> {
        self.save(&[Item::Part(part)]).await
    }

    /// Writes a part that is still changing without publishing it (its state went out live).
    pub fn queue_part(&self, part: Arc<Part>) {
        self.release.write(part);
    }

    /// Publishes an event that writes nothing (a streaming part's delta, a todo list).
    pub fn publish_event(&self, event: Event) {
        self.release.publish([event]);
    }

    /// Publishes a part update without writing it (live metadata of a running tool, a
    /// streaming part's state).
    pub fn part_live(&self, part: Arc<Part>) {
        self.release.publish([Event::PartUpdated { part }]);
    }

    /// Publishes the session's status (and `session.idle` after an idle status).
    pub fn status(&self, session: &Session, status: SessionStatus) {
        let idle = status == SessionStatus::Idle;
        if idle {
            self.core.statuses.remove(&session.id);
        } else {
            self.core
                .statuses
                .insert(session.id.clone(), status.clone());
        }
        let status = Event::SessionStatus {
            session_id: session.id.clone(),
            status,
        };
        if idle {
            let idle = Event::SessionIdle {
                session_id: session.id.clone(),
            };
            self.release.publish([status, idle]);
        } else {
            self.release.publish([status]);
        }
    }
}

/// An item as the queue keeps it.
fn owned(item: &Item<'_>) -> Saved {
    match item {
        Item::Message(m) => Saved::Message(Arc::clone(m)),
        Item::Part(p) => Saved::Part(Arc::clone(p)),
    }
}
