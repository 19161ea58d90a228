//! The outbound half of the bridge: every event this node publishes on its bus goes, in bus
//! order, to the events stream, on the subject of its session tree.
//!
//! It runs in a task of its own fed by the bus's tap (an unbounded queue), so the local
//! publisher never waits for NATS. Publishes are pipelined: up to [`WINDOW`] wait for their
//! acknowledgements at once. A failed publish (NATS away, a timeout) is logged and counted,
//! and the events not yet acknowledged are sent again in order once the connection is back,
//! under the same message ids, so that the stream stores each once. While NATS is away events
//! wait in memory, up to [`MAX_BUFFERED`]; beyond that they are dropped and counted as missed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::{self, message::PublishMessage};
use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::names::Names;
use super::status::Counters;
use crate::bus::{BusHandle, Envelope};

/// The header naming the node that published an event.
pub const NODE_HEADER: &str = "Taskforce-Node";

/// How many publishes wait for their acknowledgements at once.
const WINDOW: usize = 4096;

/// The most events kept while they cannot be published.
const MAX_BUFFERED: usize = 200_000;

/// How long to wait before trying again after a failure while the connection looks up.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// How far the bridge has got with this node's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Every event of this node up to this bus number is stored in the stream (or was given
    /// up as missed).
    pub done: u64,
    /// The stream sequence of the newest of this node's events stored.
    pub stream: u64,
}

/// One event on its way.
struct Outgoing {
    local: u64,
    subject: String,
    payload: Bytes,
    id: String,
}

/// What the task needs.
pub(crate) struct Outbound {
    pub js: jetstream::Context,
    pub names: Names,
    pub node: Arc<str>,
    /// Unique to this start: message ids never repeat across starts of a node of one name.
    pub run: String,
    pub bus: BusHandle,
    pub tap: mpsc::UnboundedReceiver<Arc<Envelope>>,
    pub counters: Arc<Counters>,
    pub progress: watch::Sender<Progress>,
    pub stop: CancellationToken,
}

type Ack = BoxFuture<'static, Result<u64, String>>;

impl Outbound {
    /// Publishes until the bus goes away or `stop` is cancelled.
    pub(crate) async fn run(mut self) {
        let mut waiting: VecDeque<Outgoing> = VecDeque::new();
        // `waiting[..sent]` are published and their acks are in `acks`, in the same order.
        let mut sent = 0usize;
        let mut acks: FuturesOrdered<Ack> = FuturesOrdered::new();
        let mut received = 0u64;
        let mut up = self.counters.up();
        let mut retry_at: Option<tokio::time::Instant> = None;
        let mut tap_open = true;
        loop {
            let paused = retry_at.is_some() || !*up.borrow();
            if !paused {
                while sent < waiting.len() && acks.len() < WINDOW {
                    let out = &waiting[sent];
                    let message = PublishMessage::build()
                        .payload(out.payload.clone())
                        .message_id(&out.id)
                        .header(NODE_HEADER, &*self.node);
                    match self.js.send_publish(out.subject.clone(), message).await {
                        Ok(ack) => {
                            acks.push_back(Box::pin(async move {
                                ack.await.map(|a| a.sequence).map_err(|e| e.to_string())
                            }));
                            sent += 1;
                        }
                        Err(e) => {
                            self.failed(&e.to_string());
                            acks = FuturesOrdered::new();
                            sent = 0;
                            retry_at = Some(tokio::time::Instant::now() + RETRY_AFTER);
                            break;
                        }
                    }
                }
            }
            if !tap_open && waiting.is_empty() {
                return;
            }
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return,
                Some(ack) = acks.next(), if !acks.is_empty() => match ack {
                    Ok(sequence) => {
                        if let Some(done) = waiting.pop_front() {
                            sent -= 1;
                            self.counters.published.fetch_add(1, Ordering::Relaxed);
                            self.counters.pending.store(waiting.len() as u64, Ordering::Relaxed);
                            let next = waiting.front().map_or(received, |o| o.local - 1);
                            self.progress.send_modify(|p| {
                                p.done = p.done.max(next.max(done.local));
                                p.stream = p.stream.max(sequence);
                            });
                        }
                    }
                    Err(e) => {
                        self.failed(&e);
                        // Everything not acknowledged goes again, in order, under its id.
                        acks = FuturesOrdered::new();
                        sent = 0;
                        retry_at = Some(tokio::time::Instant::now() + RETRY_AFTER);
                    }
                },
                envelope = self.tap.recv(), if tap_open => match envelope {
                    Some(envelope) => {
                        received = envelope.seq;
                        self.take(&envelope, &mut waiting);
                        if waiting.is_empty() {
                            self.progress.send_modify(|p| p.done = p.done.max(received));
                        }
                    }
                    None => tap_open = false,
                },
                Ok(()) = up.changed(), if !*up.borrow() || retry_at.is_some() => {
                    // Back: what waits goes now.
                    if *up.borrow() {
                        retry_at = None;
                    }
                }
                () = sleep_until(retry_at) => retry_at = None,
            }
        }
    }

    /// Queues one event of this node.
    fn take(&self, envelope: &Envelope, waiting: &mut VecDeque<Outgoing>) {
        if waiting.len() >= MAX_BUFFERED {
            let missed = self.counters.missed.fetch_add(1, Ordering::Relaxed) + 1;
            if missed == 1 || missed.is_power_of_two() {
                tracing::error!(
                    "{missed} events of this node could not be kept for the cluster while NATS is away"
                );
            }
            return;
        }
        let payload = match serde_json::to_vec(&envelope.event) {
            Ok(json) => Bytes::from(json),
            Err(e) => {
                tracing::error!("cannot serialize event {}: {e}", envelope.seq);
                self.counters.missed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let subject = match envelope.event.session_id() {
            Some(session) => self.names.tree_subject(&self.bus.root_of(session)),
            None => self.names.global_subject(),
        };
        waiting.push_back(Outgoing {
            local: envelope.seq,
            subject,
            payload,
            id: format!("{}.{}.{}", self.node, self.run, envelope.seq),
        });
        self.counters
            .pending
            .store(waiting.len() as u64, Ordering::Relaxed);
    }

    fn failed(&self, error: &str) {
        let failed = self.counters.failed.fetch_add(1, Ordering::Relaxed) + 1;
        if failed == 1 || failed.is_power_of_two() {
            tracing::warn!(
                "publishing events to the cluster failed ({failed} so far): {error}; trying again"
            );
        }
    }
}

/// Resolves at `at`, or never when there is none.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
