//! The server's event log: every bus event serialized once into ready SSE frames, kept in a
//! bounded ring so a client that reconnects with `Last-Event-ID` gets what it missed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use futures::StreamExt;
use taskforce_actors::Runtime;
use taskforce_actors::bus::{BusItem, Envelope, Filter};
use tokio::sync::broadcast;

/// One event as both SSE frames: for `/event` and for `/global/event`.
#[derive(Debug)]
pub struct Frame {
    /// The bus sequence number, sent as the frame's `id:`.
    pub seq: u64,
    /// `id: N\ndata: {type, properties}\n\n`.
    pub local: Bytes,
    /// `id: N\ndata: {directory, payload}\n\n`.
    pub global: Bytes,
}

/// What the log hands a live client.
#[derive(Debug, Clone)]
pub enum Item {
    /// The next event.
    Frame(Arc<Frame>),
    /// The log itself fell behind the bus: events are gone, clients must resync.
    Gap,
}

/// Where a (re)connecting client starts.
pub struct Start {
    /// Missed events still in the ring, oldest first.
    pub backlog: Vec<Arc<Frame>>,
    /// The client's last event is older than the ring: it must resync from the API.
    pub gone: bool,
    /// Live events from here on (may repeat the backlog's tail: skip by `seq`).
    pub live: broadcast::Receiver<Item>,
}

struct Ring {
    frames: VecDeque<Arc<Frame>>,
    capacity: usize,
    /// The sequence number of the newest event seen (0: none yet).
    last: u64,
    /// Events up to this number were lost by the log itself.
    lost_through: u64,
}

/// The replay ring and the live fan-out of ready frames.
#[derive(Clone)]
pub struct EventLog {
    ring: Arc<Mutex<Ring>>,
    live: broadcast::Sender<Item>,
    /// The project directory as a JSON string, for `/global/event` frames.
    directory: Arc<str>,
}

impl EventLog {
    /// Starts following every event of `runtime`, keeping the last `capacity` for replay.
    pub fn start(runtime: &Runtime, directory: String, capacity: usize) -> Self {
        let log = EventLog::new(directory, capacity);
        let mut subscription = runtime.subscribe(Filter::All);
        let follower = log.clone();
        tokio::spawn(async move {
            while let Some(item) = subscription.next().await {
                match item {
                    BusItem::Event(envelope) => follower.push(&envelope),
                    BusItem::Lagged(_) => follower.gap(),
                }
            }
        });
        log
    }

    /// An empty log for `directory` keeping the last `capacity` events.
    pub(crate) fn new(directory: String, capacity: usize) -> Self {
        // The live channel is shorter than the ring: a client that falls behind it catches up
        // from the ring, and only one that falls behind the ring too must resync.
        let (live, _) = broadcast::channel(capacity.clamp(16, 1024));
        EventLog {
            ring: Arc::new(Mutex::new(Ring {
                frames: VecDeque::with_capacity(capacity.min(16_384)),
                capacity: capacity.max(1),
                last: 0,
                lost_through: 0,
            })),
            live,
            directory: Arc::from(
                serde_json::to_string(&directory).unwrap_or_else(|_| "\"\"".into()),
            ),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn push(&self, envelope: &Envelope) {
        let payload = match serde_json::to_string(&envelope.event) {
            Ok(json) => json,
            Err(e) => {
                tracing::error!("cannot serialize event {}: {e}", envelope.seq);
                return;
            }
        };
        let directory = &self.directory;
        let frame = Arc::new(Frame {
            seq: envelope.seq,
            local: Bytes::from(format!("id: {}\ndata: {payload}\n\n", envelope.seq)),
            global: Bytes::from(format!(
                "id: {}\ndata: {{\"directory\":{directory},\"payload\":{payload}}}\n\n",
                envelope.seq
            )),
        });
        // Ring and fan-out change under one lock, so a joining client sees each event once.
        let mut ring = self.lock();
        if ring.frames.len() == ring.capacity {
            ring.frames.pop_front();
        }
        ring.last = envelope.seq;
        ring.frames.push_back(frame.clone());
        let _ = self.live.send(Item::Frame(frame));
    }

    fn gap(&self) {
        let mut ring = self.lock();
        ring.frames.clear();
        ring.lost_through = ring.last;
        let _ = self.live.send(Item::Gap);
    }

    /// Joins the live stream; `last` is the client's `Last-Event-ID`, if it sent one.
    pub fn join(&self, last: Option<u64>) -> Start {
        let ring = self.lock();
        let live = self.live.subscribe();
        let Some(last) = last else {
            return Start {
                backlog: Vec::new(),
                gone: false,
                live,
            };
        };
        let oldest = ring.frames.front().map_or(ring.last + 1, |f| f.seq);
        // Everything after `last` is still here when the ring starts at or before `last + 1`
        // and the log lost nothing after it.
        let gone = last > ring.last || last + 1 < oldest || last < ring.lost_through;
        let backlog = if gone {
            Vec::new()
        } else {
            ring.frames
                .iter()
                .filter(|f| f.seq > last)
                .cloned()
                .collect()
        };
        Start {
            backlog,
            gone,
            live,
        }
    }

    /// Frames newer than `after` still in the ring, or `None` when some of them are gone.
    pub fn since(&self, after: u64) -> Option<Vec<Arc<Frame>>> {
        let ring = self.lock();
        let oldest = ring.frames.front().map_or(ring.last + 1, |f| f.seq);
        if after + 1 < oldest || after < ring.lost_through {
            return None;
        }
        Some(
            ring.frames
                .iter()
                .filter(|f| f.seq > after)
                .cloned()
                .collect(),
        )
    }
}
