//! Writing the session's state: to the store first, then to the bus.

use std::sync::Arc;

use taskforce_agents::model::{Message, Part, Session};

use crate::bus::{Event, SessionStatus};
use crate::core::Core;
use crate::store::StoreError;

/// Something to save.
#[derive(Clone, Copy)]
pub(crate) enum Item<'a> {
    /// A session stored for the first time (published as created, then updated).
    NewSession(&'a Session),
    /// A message, published as the shared copy it is.
    Message(&'a Arc<Message>),
    Part(&'a Arc<Part>),
}

/// Final states kept back to go with the next commit instead of one of their own: a prompt's
/// user message and a step's closing state, written with the next step's opening (a delegated
/// prompt commits 5 times instead of 9). Nothing held is published before it is on disk; what
/// no commit follows is written by [`Writer::flush`].
#[derive(Default)]
pub(crate) struct Held(Vec<HeldItem>);

/// One held item (owned, where [`Item`] borrows).
enum HeldItem {
    NewSession(Arc<Session>),
    Message(Arc<Message>),
    Part(Arc<Part>),
}

impl Held {
    /// Holds a session stored for the first time.
    pub fn session(&mut self, session: Arc<Session>) {
        self.0.push(HeldItem::NewSession(session));
    }

    /// Holds a message.
    pub fn message(&mut self, message: Arc<Message>) {
        self.0.push(HeldItem::Message(message));
    }

    /// Holds parts, in order.
    pub fn parts(&mut self, parts: impl IntoIterator<Item = Arc<Part>>) {
        self.0.extend(parts.into_iter().map(HeldItem::Part));
    }

    /// Nothing is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn items(&self) -> impl Iterator<Item = Item<'_>> {
        self.0.iter().map(|held| match held {
            HeldItem::NewSession(s) => Item::NewSession(s),
            HeldItem::Message(m) => Item::Message(m),
            HeldItem::Part(p) => Item::Part(p),
        })
    }
}

/// Persists and publishes messages, parts and status of sessions.
#[derive(Clone)]
pub(crate) struct Writer {
    core: Arc<Core>,
}

impl Writer {
    pub fn new(core: Arc<Core>) -> Self {
        Writer { core }
    }

    /// Stores several messages and parts in one go, then publishes them in order: all are on
    /// disk before any event goes out.
    pub async fn save(&self, items: &[Item<'_>]) -> Result<(), StoreError> {
        let (sessions, messages, parts) = split(items);
        let began = std::time::Instant::now();
        self.core
            .store
            .put_many(&sessions, &messages, &parts)
            .await?;
        // How long the run waited for its commit, for the benchmarks.
        tracing::debug!(
            target: "taskforce_actors::session::save",
            micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
            "saved"
        );
        self.publish(items);
        // A prompt moves its session's `time.updated` (the end of the answer does too), unless
        // the session was stored with it at that time already.
        for m in &messages {
            if let Message::User(u) = m
                && !sessions
                    .iter()
                    .any(|s| s.id == u.session_id && s.time.updated >= u.time.created)
            {
                self.core.toucher.touch(&u.session_id, u.time.created);
            }
        }
        Ok(())
    }

    /// Stores what `held` holds, then `items`, in one commit, and publishes them in that
    /// order; `held` is emptied either way (a failed commit fails the loop).
    pub async fn save_after(&self, held: &mut Held, items: &[Item<'_>]) -> Result<(), StoreError> {
        if held.is_empty() {
            return self.save(items).await;
        }
        let held = std::mem::take(held);
        let all: Vec<Item<'_>> = held.items().chain(items.iter().copied()).collect();
        self.save(&all).await
    }

    /// Stores and publishes what `held` holds (when no commit of its own follows).
    pub async fn flush(&self, held: &mut Held) -> Result<(), StoreError> {
        if held.is_empty() {
            return Ok(());
        }
        self.save_after(held, &[]).await
    }

    /// Queues messages and parts to be stored in one go and publishes them at once: for the
    /// end of a cancelled run, which must not wait for the disk (nor spend its time encoding:
    /// the store's writer does that). Reads of the session wait for the queued write, so nobody
    /// who heard of the state reads an older one. Parts are published before the messages.
    pub fn save_behind(&self, messages: Vec<Arc<Message>>, parts: Vec<Arc<Part>>) {
        let events: Vec<Event> = parts
            .iter()
            .map(|p| Event::PartUpdated { part: p.clone() })
            .chain(messages.iter().map(|m| Event::MessageUpdated {
                info: Arc::clone(m),
            }))
            .collect();
        self.core.store.queue_many(Vec::new(), messages, parts);
        self.core.bus.publish_all(events);
    }

    /// Publishes saved items in order.
    fn publish(&self, items: &[Item<'_>]) {
        // Built before the bus's ordering lock is taken, so that the lock is held briefly.
        let events: Vec<Event> = items
            .iter()
            .flat_map(|item| {
                let (first, second) = match item {
                    Item::NewSession(s) => (
                        Event::SessionCreated {
                            info: Box::new((*s).clone()),
                        },
                        Some(Event::SessionUpdated {
                            info: Box::new((*s).clone()),
                        }),
                    ),
                    Item::Message(m) => (
                        Event::MessageUpdated {
                            info: Arc::clone(m),
                        },
                        None,
                    ),
                    Item::Part(p) => (
                        Event::PartUpdated {
                            part: Arc::clone(p),
                        },
                        None,
                    ),
                };
                std::iter::once(first).chain(second)
            })
            .collect();
        self.core.bus.publish_all(events);
    }

    /// Stores a part, then publishes `message.part.updated` (the part is on disk first).
    pub async fn part(&self, part: &Arc<Part>) -> Result<(), StoreError> {
        self.save(&[Item::Part(part)]).await
    }

    /// Publishes an event that writes nothing (a streaming part's delta).
    pub fn publish_event(&self, event: Event) {
        self.core.bus.publish(event);
    }

    /// Publishes a part update without writing it (live metadata of a running tool, a
    /// streaming part's state).
    pub fn part_live(&self, part: Arc<Part>) {
        self.core.bus.publish(Event::PartUpdated { part });
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
            self.core.bus.publish_all([status, idle]);
        } else {
            self.core.bus.publish(status);
        }
    }
}

/// The sessions, messages and parts among `items`.
fn split<'a>(items: &[Item<'a>]) -> (Vec<&'a Session>, Vec<&'a Message>, Vec<&'a Part>) {
    let (mut sessions, mut messages, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    for item in items {
        match item {
            Item::NewSession(s) => sessions.push(*s),
            Item::Message(m) => messages.push(&***m),
            Item::Part(p) => parts.push(&***p),
        }
    }
    (sessions, messages, parts)
}
