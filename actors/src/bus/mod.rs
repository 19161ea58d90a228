//! The bus: one actor that stamps every state change with a sequence number and fans it out.
//!
//! Publishing never waits for subscribers. Each subscriber reads from a bounded broadcast
//! buffer; one that falls behind by more than the buffer is told how many events it missed
//! ([`BusItem::Lagged`]) and can resync from the store.

mod event;
mod subscription;

pub use event::{Event, SessionStatus};
pub use subscription::{BusItem, Filter, Subscription};

use std::sync::Arc;

use actix::{Actor, Addr, Context, Handler, Message};
use dashmap::DashMap;
use taskforce_agents::id::SessionId;
use tokio::sync::broadcast;

/// An event with its position in the bus's total order.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Monotonic sequence number, starting at 1.
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// Parent links of every session the bus has seen, for subtree filters.
pub(crate) type ParentMap = Arc<DashMap<SessionId, SessionId>>;

/// Per-session channels for subscriptions filtered to one session.
pub(crate) type SessionChannels = Arc<DashMap<SessionId, broadcast::Sender<Arc<Envelope>>>>;

/// Buffer of a one-session subscription.
const SESSION_CAPACITY: usize = 256;

/// The bus actor.
struct Bus {
    sender: broadcast::Sender<Arc<Envelope>>,
    sessions: SessionChannels,
    parents: ParentMap,
    seq: u64,
}

impl Actor for Bus {
    type Context = Context<Self>;
}

/// Publish one event.
struct Publish(Event);

impl Message for Publish {
    type Result = ();
}

impl Handler<Publish> for Bus {
    type Result = ();

    fn handle(&mut self, msg: Publish, _: &mut Self::Context) {
        if let Event::SessionCreated { info } = &msg.0
            && let Some(parent) = &info.parent_id
        {
            self.parents.insert(info.id.clone(), parent.clone());
        }
        self.seq += 1;
        let envelope = Arc::new(Envelope {
            seq: self.seq,
            event: msg.0,
        });
        // One-session subscribers have their own channel, so they cost nothing to the others.
        if let Some(id) = envelope.event.session_id() {
            let gone = match self.sessions.get(id) {
                Some(tx) => tx.send(envelope.clone()).is_err(),
                None => false,
            };
            if gone {
                self.sessions
                    .remove_if(id, |_, tx| tx.receiver_count() == 0);
            }
        }
        // No receiver is not an error: nobody listens right now.
        let _ = self.sender.send(envelope);
    }
}

/// A cheap, cloneable handle to the bus.
#[derive(Clone)]
pub struct BusHandle {
    addr: Addr<Bus>,
    sender: broadcast::Sender<Arc<Envelope>>,
    sessions: SessionChannels,
    parents: ParentMap,
}

impl BusHandle {
    /// Starts the bus actor on the current arbiter; `capacity` events are buffered per subscriber.
    pub fn start(capacity: usize) -> BusHandle {
        let (sender, _) = broadcast::channel(capacity.max(16));
        let parents: ParentMap = Arc::default();
        let sessions: SessionChannels = Arc::default();
        let addr = Bus {
            sender: sender.clone(),
            sessions: sessions.clone(),
            parents: parents.clone(),
            seq: 0,
        }
        .start();
        BusHandle {
            addr,
            sender,
            sessions,
            parents,
        }
    }

    /// Publishes an event; returns at once.
    pub fn publish(&self, event: Event) {
        self.addr.do_send(Publish(event));
    }

    /// Publishes an event and waits until the bus has sent it to every subscriber's buffer.
    pub async fn publish_and_wait(&self, event: Event) {
        if self.addr.send(Publish(event)).await.is_err() {
            tracing::warn!("the bus has stopped; an event was dropped");
        }
    }

    /// Subscribes to the events that pass `filter`, from now on.
    pub fn subscribe(&self, filter: Filter) -> Subscription {
        let receiver = match &filter {
            Filter::Session(id) => self
                .sessions
                .entry(id.clone())
                .or_insert_with(|| broadcast::channel(SESSION_CAPACITY).0)
                .subscribe(),
            Filter::All | Filter::Subtree(_) => self.sender.subscribe(),
        };
        Subscription::new(receiver, filter, self.parents.clone())
    }

    /// Records that `child` is a child of `parent` (for sessions loaded from the store).
    pub fn register_parent(&self, child: &SessionId, parent: &SessionId) {
        self.parents.insert(child.clone(), parent.clone());
    }

    /// How deep a session is below its root, as far as the bus knows its ancestors.
    pub fn depth_of(&self, session: &SessionId) -> u32 {
        let mut depth = 0;
        let mut current = session.clone();
        while let Some(parent) = self.parents.get(&current).map(|p| p.value().clone()) {
            depth += 1;
            if depth >= 256 {
                break;
            }
            current = parent;
        }
        depth
    }

    /// How many subscriptions are open.
    pub fn subscriber_count(&self) -> usize {
        self.sender.receiver_count()
            + self
                .sessions
                .iter()
                .map(|e| e.value().receiver_count())
                .sum::<usize>()
    }
}
