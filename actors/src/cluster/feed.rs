//! Reading the events stream in order: the inbound half of the bridge (other nodes' events
//! into this node's bus) and the feeds of the SSE streams (every node's events, numbered by
//! their stream sequence, the same on every node).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_nats::jetstream::consumer::{DeliverPolicy, pull::OrderedConfig};
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use super::ClusterError;
use super::held_elsewhere::HeldElsewhere;
use super::names::Names;
use super::outbound::NODE_HEADER;
use super::status::Counters;
use crate::bus::{BusHandle, Event};

/// One event of the stream.
#[derive(Debug, Clone)]
pub struct StreamEvent {
    /// Its stream sequence: unique and ordered across the cluster.
    pub seq: u64,
    /// The node that published it, when it said.
    pub node: Option<Arc<str>>,
    /// The event.
    pub event: Event,
    /// The event as published: its `{type, properties}` JSON.
    pub json: Bytes,
}

/// What reading the stream yields: an event, or a message that is not one.
pub(crate) enum Read {
    /// An event.
    Event(StreamEvent),
    /// A message at this sequence that could not be read as an event.
    Unreadable(u64),
}

/// The events of the stream after sequence `after`, in order, for as long as the stream is
/// read (an ordered consumer: it starts again from where it was when the connection drops or
/// a message goes missing). When `after + 1` is no longer kept, the first event has a larger
/// sequence than asked for.
pub(crate) fn events_after(
    js: jetstream::Context,
    names: &Names,
    after: u64,
) -> BoxStream<'static, Result<Read, ClusterError>> {
    let stream_name = names.events_stream();
    let filter = names.events_subjects();
    let open = async move {
        let stream: stream::Stream = js
            .get_stream(&stream_name)
            .await
            .map_err(|e| ClusterError::jetstream(format!("opening stream {stream_name}"), e))?;
        let consumer = stream
            .create_consumer(OrderedConfig {
                filter_subject: filter,
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: after + 1,
                },
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::jetstream(format!("reading stream {stream_name}"), e))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| ClusterError::jetstream(format!("reading stream {stream_name}"), e))?;
        Ok::<_, ClusterError>(messages.map(move |message| {
            let message =
                message.map_err(|e| ClusterError::jetstream("reading the events stream", e))?;
            Ok(read(&message))
        }))
    };
    futures::stream::once(open)
        .map(|opened| match opened {
            Ok(messages) => messages.boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
}

/// Reads one message as an event.
fn read(message: &jetstream::Message) -> Read {
    let seq = message.info().map_or(0, |i| i.stream_sequence);
    let node = message
        .headers
        .as_ref()
        .and_then(|h| h.get(NODE_HEADER))
        .map(|v| Arc::from(v.as_str()));
    match serde_json::from_slice::<Event>(&message.payload) {
        Ok(event) => Read::Event(StreamEvent {
            seq,
            node,
            event,
            json: message.payload.clone(),
        }),
        Err(e) => {
            tracing::warn!("stream message {seq} is not an event: {e}");
            Read::Unreadable(seq)
        }
    }
}

/// The inbound half of the bridge: feeds the events of other nodes, from stream sequence
/// `after` on, into `bus`, until `stop` is cancelled. This node's own events are skipped (its
/// bus has them already), so nothing goes back to the cluster. The asks they raise and close
/// are noted in `held`.
pub(crate) struct Inbound {
    pub(crate) js: jetstream::Context,
    pub(crate) names: Names,
    /// This node.
    pub(crate) node: Arc<str>,
    pub(crate) bus: BusHandle,
    pub(crate) held: Arc<HeldElsewhere>,
    pub(crate) counters: Arc<Counters>,
    /// The last sequence already seen.
    pub(crate) after: u64,
    pub(crate) stop: CancellationToken,
}

impl Inbound {
    /// Runs the inbound half until stopped.
    pub(crate) async fn run(self) {
        let Inbound {
            js,
            names,
            node,
            bus,
            held,
            counters,
            mut after,
            stop,
        } = self;
        loop {
            let mut events = events_after(js.clone(), &names, after);
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return,
                    next = events.next() => next,
                };
                match next {
                    Some(Ok(Read::Event(e))) => {
                        after = e.seq;
                        if e.node.as_deref() != Some(&*node) {
                            counters.received.fetch_add(1, Ordering::Relaxed);
                            if let Some(from) = &e.node {
                                held.observe(from, &e.event);
                            }
                            bus.publish_remote(e.event);
                        }
                    }
                    Some(Ok(Read::Unreadable(seq))) => {
                        after = after.max(seq);
                        counters.unreadable.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Err(e)) => {
                        tracing::warn!("reading other nodes' events: {e}; starting again");
                        break;
                    }
                    None => break,
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(super::RETRY_AFTER) => {}
            }
        }
    }
}
