//! The server's event log: every bus event serialized once into the replay [`Ring`], which the
//! SSE clients read from (a live client reads the newest frames as they arrive, a reconnecting
//! one first what it missed). Clients keep no copies: they hold a position in the ring and are
//! woken when it grows.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use taskforce_actors::Runtime;
use taskforce_actors::bus::{BusItem, Envelope, Event, Filter};
use taskforce_actors::cluster::{Cluster, StreamEvent};
use tokio::sync::watch;

use super::readers::{ReaderPosition, Readers};

pub use super::ring::Frame;
use super::ring::{After, Ring, Role};

/// A client's `Last-Event-ID`, as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastEventId {
    /// `<epoch>-<seq>`, as the server gives ids out.
    Id {
        /// The server run that gave it out.
        epoch: u64,
        /// The event's number in that run.
        seq: u64,
    },
    /// Anything else: not an id of this server.
    Unknown,
}

impl LastEventId {
    /// Reads a header value.
    pub fn parse(text: &str) -> LastEventId {
        text.trim()
            .split_once('-')
            .and_then(|(epoch, seq)| Some((epoch.parse().ok()?, seq.parse().ok()?)))
            .map_or(LastEventId::Unknown, |(epoch, seq)| LastEventId::Id {
                epoch,
                seq,
            })
    }
}

/// Where a (re)connecting client starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    /// The number of the last event it has: it reads the ones after.
    pub after: u64,
    /// Its last event cannot be replayed from: it must resync from the API first.
    pub resync: bool,
    /// In a cluster: the ring does not hold the events after its last one, so they are read
    /// from the cluster's stream first.
    pub from_stream: bool,
}

/// The replay ring and the wake-up of its readers.
#[derive(Clone)]
pub struct EventLog {
    ring: Arc<Mutex<Ring>>,
    /// How far each open stream has handed its events to its connection.
    readers: Arc<Readers>,
    /// The newest number in the ring, for readers waiting for more.
    grown: watch::Sender<u64>,
    /// The server run, the `<epoch>` of every id.
    epoch: u64,
    /// The project directory as a JSON string, for `/global/event` frames.
    directory: Arc<str>,
    /// The cluster whose stream feeds the ring, when the runtime is a node of one: ids are
    /// then stream sequences, the same on every node.
    cluster: Option<Arc<Cluster>>,
}

impl EventLog {
    /// Starts following every event of `runtime`, keeping up to `max_bytes` for replay. In a
    /// cluster the ring follows the cluster's stream instead (every node's events, numbered
    /// by stream sequence, with the stream's epoch), and `epoch` is not used.
    pub fn start(runtime: &Runtime, directory: String, max_bytes: usize, epoch: u64) -> Self {
        if let Some(cluster) = runtime.cluster() {
            return super::cluster::follow(cluster.clone(), directory, max_bytes);
        }
        let log = EventLog::new(directory, max_bytes, epoch);
        let mut subscription = runtime.subscribe(Filter::All);
        let follower = log.clone();
        tokio::spawn(async move {
            while let Some(item) = subscription.next().await {
                match item {
                    BusItem::Event(envelope) => follower.push(&envelope),
                    // The numbers jump: the ring sees it and older ids resync.
                    BusItem::Lagged(n) => tracing::warn!("the event log missed {n} events"),
                }
            }
        });
        log
    }

    /// An empty log for `directory` keeping up to `max_bytes` of events.
    pub(crate) fn new(directory: String, max_bytes: usize, epoch: u64) -> Self {
        EventLog::with_ring(directory, Ring::new(max_bytes), epoch, None)
    }

    /// A log for `directory` around `ring`.
    pub(crate) fn with_ring(
        directory: String,
        ring: Ring,
        epoch: u64,
        cluster: Option<Arc<Cluster>>,
    ) -> Self {
        EventLog {
            grown: watch::Sender::new(ring.last()),
            ring: Arc::new(Mutex::new(ring)),
            readers: Arc::default(),
            epoch,
            directory: Arc::from(
                serde_json::to_string(&directory).unwrap_or_else(|_| "\"\"".into()),
            ),
            cluster,
        }
    }

    /// Whether nothing but the caller holds this log (every server and stream let it go).
    pub(crate) fn is_only_holder(&self) -> bool {
        Arc::strong_count(&self.ring) == 1
    }

    /// The cluster whose stream feeds the ring, if any.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The server run, the `<epoch>` of every id.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The project directory as a JSON string.
    pub fn directory(&self) -> &str {
        &self.directory
    }

    /// Keeps one event and wakes the readers.
    pub(crate) fn push(&self, envelope: &Envelope) {
        let payload = match serde_json::to_vec(&envelope.event) {
            Ok(mut json) => {
                // Kept for a while: without the room the serializer left (up to as much again).
                if json.capacity() - json.len() > 4096 {
                    json.shrink_to_fit();
                }
                Bytes::from(json)
            }
            Err(e) => {
                tracing::error!("cannot serialize event {}: {e}", envelope.seq);
                return;
            }
        };
        self.keep(envelope.seq, &envelope.event, payload);
    }

    /// Keeps one event of a cluster's stream (numbered by its stream sequence) and wakes the
    /// readers.
    pub(crate) fn push_stream(&self, event: &StreamEvent) {
        self.keep(event.seq, &event.event, event.json.clone());
    }

    fn keep(&self, seq: u64, event: &Event, payload: Bytes) {
        let role = match event {
            Event::PartUpdated { part } => Role::Whole(part.id.clone()),
            Event::PartDelta { part_id, .. } => Role::Delta(part_id.clone()),
            _ => Role::Other,
        };
        let last = {
            let mut ring = self.lock();
            ring.push(seq, payload, role);
            ring.last()
        };
        self.grown.send_replace(last);
    }

    /// Whether every event after `seq` can be replayed from the ring.
    pub(crate) fn covers(&self, seq: u64) -> bool {
        self.lock().covers(seq)
    }

    /// The number every event published so far has reached, for an answer that waits for its
    /// events: the bus's newest number, or in a cluster the stream sequence of this node's
    /// newest event once it is stored (`None` when that took longer than `limit`).
    pub(crate) async fn published(&self, runtime: &Runtime, limit: Duration) -> Option<u64> {
        match &self.cluster {
            None => Some(runtime.last_event_seq()),
            Some(cluster) => cluster.published(limit).await,
        }
    }

    /// Where a client that sent `last` (its `Last-Event-ID`, if any) starts: after the newest
    /// event when it sent none; after its id when the ring can replay everything since; else
    /// after the newest event, told to resync (an id of another run, one never given out, one
    /// whose followers are no longer all kept, or not an id at all).
    pub fn join(&self, last: Option<&LastEventId>) -> Join {
        let ring = self.lock();
        let newest = Join {
            after: ring.last(),
            resync: false,
            from_stream: false,
        };
        match last {
            None => newest,
            Some(LastEventId::Id { epoch, seq }) if *epoch == self.epoch && ring.covers(*seq) => {
                Join {
                    after: *seq,
                    ..newest
                }
            }
            // In a cluster every id of this stream is good: what the ring lacks (events from
            // before this server, or from another node ahead of it) is read from the stream.
            Some(LastEventId::Id { epoch, seq })
                if *epoch == self.epoch && self.cluster.is_some() =>
            {
                Join {
                    after: *seq,
                    from_stream: true,
                    ..newest
                }
            }
            Some(_) => Join {
                resync: true,
                ..newest
            },
        }
    }

    /// At most `limit` frames after `seq`, or `Err(newest)` when some of them are gone (the
    /// reader must resync and goes on after `newest`).
    pub fn after(&self, seq: u64, limit: usize) -> Result<Vec<Arc<Frame>>, u64> {
        let ring = self.lock();
        match ring.after(seq, limit) {
            After::Frames(frames) => Ok(frames),
            After::Behind => Err(ring.last()),
        }
    }

    /// A receiver that changes whenever the ring grows.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.grown.subscribe()
    }

    /// Registers a stream that has handed out every event up to `seq`; it reports its progress
    /// through the returned position, and leaves when the position is dropped.
    pub(crate) fn reader(&self, seq: u64) -> ReaderPosition {
        let sent = Arc::new(AtomicU64::new(seq));
        Readers::join(&self.readers, sent)
    }

    /// Whether any event stream is open.
    pub fn streams_open(&self) -> bool {
        !self.readers.none_open()
    }

    /// Waits until every event up to `seq` is in the ring and every open stream has handed it
    /// to its connection, or `limit` passed (a client that stopped reading holds nobody up
    /// for longer). Answers whether all of them got there.
    pub async fn delivered(&self, seq: u64, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut grown = self.watch();
        loop {
            // Registered before the check, so that progress after it wakes the wait.
            let progressed = self.readers.progressed();
            tokio::pin!(progressed);
            progressed.as_mut().enable();
            // With no stream open there is nobody to wait for: a stream opened later starts
            // after the newest event, or replays from the ring once the event is in it.
            if self.readers.none_open() {
                return true;
            }
            let in_ring = *grown.borrow_and_update() >= seq;
            if in_ring && self.readers.all_past(seq) {
                return true;
            }
            tokio::select! {
                _ = grown.changed(), if !in_ring => {}
                () = &mut progressed => {}
                () = tokio::time::sleep_until(deadline) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use taskforce_agents::id::SessionId;

    use super::*;

    fn push_idle(log: &EventLog, seq: u64) {
        log.push(&Envelope {
            seq,
            event: Event::SessionIdle {
                session_id: SessionId::new(),
            },
        });
    }

    #[tokio::test]
    async fn an_answer_waits_until_every_stream_has_handed_out_its_turns_events() {
        let log = EventLog::new("/p".into(), 1 << 20, 1);
        let first = log.reader(0);
        let second = log.reader(0);
        push_idle(&log, 1);
        push_idle(&log, 2);
        let wait = log.delivered(2, Duration::from_secs(3600));
        tokio::pin!(wait);
        assert!(
            (&mut wait).now_or_never().is_none(),
            "no stream has sent anything"
        );
        first.reached(2);
        assert!(
            (&mut wait).now_or_never().is_none(),
            "one stream is still behind"
        );
        // A stream that closes holds nobody up.
        drop(second);
        assert!(wait.await);
        // Events not in the ring yet are waited for too.
        let later = log.delivered(3, Duration::from_secs(3600));
        tokio::pin!(later);
        assert!((&mut later).now_or_never().is_none());
        push_idle(&log, 3);
        first.reached(3);
        assert!(later.await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_stopped_reading_holds_an_answer_up_no_longer_than_the_limit() {
        let log = EventLog::new("/p".into(), 1 << 20, 1);
        let _stuck = log.reader(0);
        push_idle(&log, 1);
        assert!(!log.delivered(1, Duration::from_secs(2)).await);
        // With no stream open, nothing is waited for, not even the ring.
        drop(_stuck);
        assert!(log.delivered(1, Duration::from_secs(2)).await);
        assert!(log.delivered(99, Duration::from_secs(2)).await);
    }

    #[test]
    fn last_event_ids_parse_as_epoch_and_number_and_anything_else_is_unknown() {
        assert_eq!(
            LastEventId::parse(" 3-42 "),
            LastEventId::Id { epoch: 3, seq: 42 }
        );
        for bad in ["42", "", "3-", "-4", "a-b", "3-4-5", "3 - 4"] {
            assert_eq!(LastEventId::parse(bad), LastEventId::Unknown, "{bad:?}");
        }
    }
}
