//! The bus: stamps every state change with a sequence number and fans it out to subscribers.
//!
//! Publishing never waits for subscribers: it puts the event in their buffers on the caller's
//! thread. Each subscriber reads from a bounded broadcast buffer; one that falls behind by more
//! than the buffer is told how many events it missed ([`BusItem::Lagged`]) and can resync from
//! the store.

mod event;
mod receiving;
mod session_queue;
mod subscription;
mod wake;

pub use event::{Event, SessionStatus, ToastVariant};
pub use subscription::{BusItem, Filter, Subscription};
pub(crate) use wake::batch_wakes_here;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use taskforce_agents::id::SessionId;
use tokio::sync::{broadcast, mpsc};

use crate::id_map::IdMap;
use session_queue::{Reader, SessionQueues};
use subscription::Source;

/// An event with its position in the bus's total order.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Monotonic sequence number, starting at 1.
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// Parent links of every session the bus has seen, for subtree filters.
pub(crate) type ParentMap = Arc<IdMap<SessionId>>;

/// The fan-out shared by every handle: stamps events and sends them to the subscribers' buffers.
struct Fanout {
    /// The last sequence number; held while sending so that buffers receive events in the
    /// order of their numbers.
    seq: Mutex<u64>,
    sender: broadcast::Sender<Arc<Envelope>>,
    sessions: SessionQueues,
    parents: ParentMap,
    /// The cluster bridge's copy of every event this node publishes itself (not those fed in
    /// from other nodes), once a bridge is attached.
    tap: OnceLock<mpsc::UnboundedSender<Arc<Envelope>>>,
    /// The number of the newest event sent to the tap.
    last_tapped: AtomicU64,
}

impl Drop for Fanout {
    /// One-session readers learn that nothing more will come (as broadcast readers do).
    fn drop(&mut self) {
        for readers in self.sessions.iter() {
            readers.iter().for_each(|q| q.close());
        }
    }
}

impl Fanout {
    fn publish(&self, event: Event) {
        self.publish_all([event]);
    }

    /// Publishes `events` in order under one hold of the ordering lock.
    fn publish_all(&self, events: impl IntoIterator<Item = Event>) {
        let mut seq = self.seq.lock().unwrap_or_else(PoisonError::into_inner);
        for event in events {
            self.send(&mut seq, event, true);
        }
    }

    /// Sends one of this node's events to the cluster bridge's tap (kept out of line, so that
    /// a bus without a tap runs the same code as before there was one).
    #[inline(never)]
    fn to_tap(&self, tap: &mpsc::UnboundedSender<Arc<Envelope>>, envelope: &Arc<Envelope>) {
        self.last_tapped.store(envelope.seq, Ordering::Release);
        // A bridge that stopped wants no more.
        let _ = tap.send(envelope.clone());
    }

    /// Publishes an event of another node: subscribers get it, the tap does not.
    fn publish_remote(&self, event: Event) {
        let mut seq = self.seq.lock().unwrap_or_else(PoisonError::into_inner);
        self.send(&mut seq, event, false);
    }

    /// Stamps `event` with the next number and puts it in the subscribers' buffers (and, for
    /// this node's own events, `local`, in the tap's).
    fn send(&self, seq: &mut u64, event: Event, local: bool) {
        if let Event::SessionCreated { info } = &event
            && let Some(parent) = &info.parent_id
        {
            self.parents.insert(info.id.clone(), parent.clone());
        }
        *seq += 1;
        let envelope = Arc::new(Envelope { seq: *seq, event });
        // One-session subscribers have their own queues, so they cost nothing to the others.
        if let Some(id) = envelope.event.session_id()
            && let Some(readers) = self.sessions.get(id)
        {
            readers.iter().for_each(|q| q.push(envelope.clone()));
        }
        if local && let Some(tap) = self.tap.get() {
            self.to_tap(tap, &envelope);
        }
        // No receiver is not an error: nobody listens right now.
        let _ = self.sender.send(envelope);
    }
}

/// A cheap, cloneable handle to the bus.
///
/// Publishing fans the event out on the caller's thread, under one lock that keeps the total
/// order: no hop through a mailbox, so a burst of events (a cancelled tree) does not queue up
/// behind one thread.
#[derive(Clone)]
pub struct BusHandle {
    fanout: Arc<Fanout>,
}

impl BusHandle {
    /// Starts the bus; `capacity` events are buffered per subscriber.
    pub fn start(capacity: usize) -> BusHandle {
        let (sender, _) = broadcast::channel(capacity.max(16));
        let fanout = Arc::new(Fanout {
            seq: Mutex::new(0),
            sender,
            sessions: Arc::default(),
            parents: Arc::default(),
            tap: OnceLock::new(),
            last_tapped: AtomicU64::new(0),
        });
        BusHandle { fanout }
    }

    /// Publishes an event: it is in every subscriber's buffer when this returns.
    pub fn publish(&self, event: Event) {
        self.fanout.publish(event);
    }

    /// The number of the newest event published (0 before the first).
    pub fn last_seq(&self) -> u64 {
        *self
            .fanout
            .seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes several events in order, one after the other with nothing in between (build
    /// them before: the bus's ordering lock is held while the iterator runs).
    pub fn publish_all(&self, events: impl IntoIterator<Item = Event>) {
        self.fanout.publish_all(events);
    }

    /// Publishes an event; kept for callers that awaited delivery (publishing no longer waits).
    pub async fn publish_and_wait(&self, event: Event) {
        self.fanout.publish(event);
    }

    /// Publishes an event that another node of the cluster published: subscribers here get it
    /// (session parent links are learned from it), and it is not sent back to the cluster.
    pub fn publish_remote(&self, event: Event) {
        self.fanout.publish_remote(event);
    }

    /// From now on, every event this node publishes itself is also sent, in order, to the
    /// returned receiver (the cluster bridge's feed); `None` when a tap is already attached.
    pub(crate) fn tap(&self) -> Option<mpsc::UnboundedReceiver<Arc<Envelope>>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        // Set under the ordering lock, so that the tap starts exactly after one event.
        let _seq = self
            .fanout
            .seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.fanout.tap.set(sender).ok()?;
        Some(receiver)
    }

    /// The number of the newest event this node published itself since a tap was attached
    /// (0 before).
    pub(crate) fn last_tapped(&self) -> u64 {
        self.fanout.last_tapped.load(Ordering::Acquire)
    }

    /// Subscribes to the events that pass `filter`, from now on.
    pub fn subscribe(&self, filter: Filter) -> Subscription {
        let source = match &filter {
            Filter::Session(id) => Source::Own(Reader::open(&self.fanout.sessions, id.clone())),
            Filter::All | Filter::Subtree(_) => Source::shared(self.fanout.sender.subscribe()),
        };
        Subscription::new(source, filter, self.fanout.parents.clone())
    }

    /// Records that `child` is a child of `parent` (for sessions loaded from the store).
    pub fn register_parent(&self, child: &SessionId, parent: &SessionId) {
        self.fanout.parents.insert(child.clone(), parent.clone());
    }

    /// The root of a session's tree, as far as the bus knows its ancestors.
    pub fn root_of(&self, session: &SessionId) -> SessionId {
        let mut current = session.clone();
        for _ in 0..256 {
            match self.fanout.parents.get(&current).map(|p| p.value().clone()) {
                Some(parent) => current = parent,
                None => break,
            }
        }
        current
    }

    /// How deep a session is below its root, as far as the bus knows its ancestors.
    pub fn depth_of(&self, session: &SessionId) -> u32 {
        let mut depth = 0;
        let mut current = session.clone();
        while let Some(parent) = self.fanout.parents.get(&current).map(|p| p.value().clone()) {
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
        self.fanout.sender.receiver_count()
            + self
                .fanout
                .sessions
                .iter()
                .map(|e| e.value().len())
                .sum::<usize>()
    }
}

/// A numbered `session.idle` envelope, for the bus's unit tests.
#[cfg(test)]
pub(super) fn test_envelope(seq: u64) -> Arc<Envelope> {
    Arc::new(Envelope {
        seq,
        event: Event::SessionIdle {
            session_id: SessionId::parse("ses_bustest").unwrap_or_else(|_| SessionId::new()),
        },
    })
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use taskforce_agents::model::Session;

    use super::*;

    fn idle(id: &SessionId) -> Event {
        Event::SessionIdle {
            session_id: id.clone(),
        }
    }

    #[tokio::test]
    async fn the_tap_gets_this_nodes_events_in_order_and_not_those_of_other_nodes() {
        let bus = BusHandle::start(64);
        let (own, remote) = (SessionId::new(), SessionId::new());
        bus.publish(idle(&own));
        let mut tap = bus.tap().unwrap();
        assert!(bus.tap().is_none(), "one tap");
        let mut all = bus.subscribe(Filter::All);
        bus.publish(idle(&own));
        bus.publish_remote(idle(&remote));
        bus.publish_all([idle(&own), idle(&own)]);
        let tapped: Vec<u64> = [tap.recv().await, tap.recv().await, tap.recv().await]
            .into_iter()
            .map(|e| e.unwrap().seq)
            .collect();
        assert_eq!(tapped, [2, 4, 5], "the remote event (3) is not tapped");
        assert!(tap.try_recv().is_err());
        assert_eq!(bus.last_tapped(), 5);
        // Subscribers get every event, the remote one included.
        let mut seen = Vec::new();
        for _ in 0..4 {
            if let Some(BusItem::Event(e)) = all.next().await {
                seen.push(e.seq);
            }
        }
        assert_eq!(seen, [2, 3, 4, 5]);
    }

    #[test]
    fn a_remote_session_created_teaches_the_bus_its_parent() {
        let bus = BusHandle::start(16);
        let root = SessionId::new();
        let mut child = Session::new("/p", "/p", "child", 1);
        child.parent_id = Some(root.clone());
        let child_id = child.id.clone();
        bus.publish_remote(Event::SessionCreated {
            info: Arc::new(child),
        });
        assert_eq!(bus.root_of(&child_id), root);
        assert_eq!(bus.root_of(&root), root);
        assert_eq!(bus.depth_of(&child_id), 1);
    }
}
