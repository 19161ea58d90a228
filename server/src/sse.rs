//! The SSE streams `/event` and `/global/event`: `server.connected` first, a heartbeat every
//! period, then each event with `id: <epoch>-<seq>`; a client that sends `Last-Event-ID` first
//! gets what it missed, or `server.resync` when that cannot be replayed. A stream ends when
//! the server stops.
//!
//! A client reads from the event log's ring at its own pace: it holds its position there and a
//! few frames on their way out, never a queue of its own.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use taskforce_actors::cluster::{ClusterError, StreamEvent};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, interval_at};
use tokio_util::sync::CancellationToken;

use super::events::{EventLog, Frame, LastEventId};
use super::readers::ReaderPosition;

/// How many frames a client takes from the ring at once.
const BATCH: usize = 64;

/// Payloads up to this size are copied into one chunk with their framing; larger ones are sent
/// as they are kept, between their framing, without a copy.
const INLINE: usize = 4096;

/// Which stream a client reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `/event`: `{type, properties}`.
    Local,
    /// `/global/event`: `{directory, payload}`.
    Global,
}

impl Flavor {
    /// A frame without an id around `event` (`{type, properties}` JSON).
    fn plain(self, event: &str) -> Bytes {
        match self {
            Flavor::Local => Bytes::from(format!("data: {event}\n\n")),
            Flavor::Global => Bytes::from(format!("data: {{\"payload\":{event}}}\n\n")),
        }
    }

    /// Appends the chunks of `frame` in this flavour to `out`.
    fn frame(self, log: &EventLog, frame: &Frame, out: &mut VecDeque<Bytes>) {
        let (head, tail): (String, &'static [u8]) = match self {
            Flavor::Local => (
                format!("id: {}-{}\ndata: ", log.epoch(), frame.seq),
                b"\n\n",
            ),
            Flavor::Global => (
                format!(
                    "id: {}-{}\ndata: {{\"directory\":{},\"payload\":",
                    log.epoch(),
                    frame.seq,
                    log.directory()
                ),
                b"}\n\n",
            ),
        };
        if frame.payload.len() <= INLINE {
            let mut chunk = Vec::with_capacity(head.len() + frame.payload.len() + tail.len());
            chunk.extend_from_slice(head.as_bytes());
            chunk.extend_from_slice(&frame.payload);
            chunk.extend_from_slice(tail);
            out.push_back(Bytes::from(chunk));
        } else {
            out.push_back(Bytes::from(head));
            out.push_back(frame.payload.clone());
            out.push_back(Bytes::from_static(tail));
        }
    }
}

const CONNECTED: &str = r#"{"type":"server.connected","properties":{}}"#;
const HEARTBEAT: &str = r#"{"type":"server.heartbeat","properties":{}}"#;

fn resync(reason: &str) -> String {
    format!(r#"{{"type":"server.resync","properties":{{"reason":"{reason}"}}}}"#)
}

/// The `Last-Event-ID` a reconnecting client sent, if it sent one.
pub fn last_event_id(headers: &HeaderMap) -> Option<LastEventId> {
    headers
        .get("last-event-id")
        .map(|v| v.to_str().map_or(LastEventId::Unknown, LastEventId::parse))
}

/// The SSE response for one client.
pub fn respond(
    log: &EventLog,
    last: Option<LastEventId>,
    flavor: Flavor,
    heartbeat: Duration,
    stop: CancellationToken,
) -> Response {
    let body = Body::from_stream(stream(log, last.as_ref(), flavor, heartbeat, stop));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

struct State {
    log: EventLog,
    flavor: Flavor,
    /// Chunks on their way out.
    pending: VecDeque<Bytes>,
    grown: watch::Receiver<u64>,
    /// The number of the last event sent (or skipped by a resync).
    last_sent: u64,
    /// What this stream reports of its progress to answers waiting for their events.
    position: ReaderPosition,
    heartbeat: Interval,
    /// Cancelled when the server stops.
    stop: CancellationToken,
    /// In a cluster: the stream's events after the client's id, read until the ring holds
    /// the rest.
    replay: Option<BoxStream<'static, Result<StreamEvent, ClusterError>>>,
}

fn stream(
    log: &EventLog,
    last: Option<&LastEventId>,
    flavor: Flavor,
    heartbeat: Duration,
    stop: CancellationToken,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let grown = log.watch();
    let join = log.join(last);
    let mut pending = VecDeque::new();
    pending.push_back(flavor.plain(CONNECTED));
    if join.resync {
        pending.push_back(flavor.plain(&resync("missed events are no longer kept")));
    }
    let state = State {
        log: log.clone(),
        flavor,
        pending,
        grown,
        last_sent: join.after,
        position: log.reader(join.after),
        heartbeat: interval_at(Instant::now() + heartbeat, heartbeat),
        stop,
        replay: match (join.from_stream, log.cluster()) {
            (true, Some(cluster)) => Some(super::cluster::replay(cluster, join.after)),
            _ => None,
        },
    };
    futures::stream::unfold(state, |mut s| async move {
        let next = next_chunk(&mut s).await?;
        Some((Ok(next), s))
    })
}

async fn next_chunk(s: &mut State) -> Option<Bytes> {
    loop {
        if s.stop.is_cancelled() {
            return None;
        }
        if let Some(next) = s.pending.pop_front() {
            return Some(next);
        }
        // Asked for more with nothing queued: every chunk so far went to the connection.
        s.position.reached(s.last_sent);
        if s.replay.is_some() {
            match replayed(s).await {
                Replayed::Continue => continue,
                Replayed::Send(chunk) => return Some(chunk),
                Replayed::End => return None,
            }
        }
        // Seen before reading, so that growth after the read wakes the wait below.
        s.grown.borrow_and_update();
        match s.log.after(s.last_sent, BATCH) {
            Ok(frames) if !frames.is_empty() => {
                for frame in frames {
                    s.last_sent = frame.seq;
                    s.flavor.frame(&s.log, &frame, &mut s.pending);
                }
                continue;
            }
            Ok(_) => {}
            // This client fell behind the ring: what it missed is gone.
            Err(newest) => {
                s.last_sent = newest;
                return Some(s.flavor.plain(&resync("the client fell behind")));
            }
        }
        tokio::select! {
            changed = s.grown.changed() => {
                if changed.is_err() {
                    return None;
                }
            }
            _ = s.heartbeat.tick() => return Some(s.flavor.plain(HEARTBEAT)),
            () = s.stop.cancelled() => return None,
        }
    }
}

/// What reading the cluster's stream for a reconnecting client gave.
enum Replayed {
    /// Frames were queued, or the ring took over: go on.
    Continue,
    /// A chunk to send now.
    Send(Bytes),
    /// The server stops.
    End,
}

/// Reads the next event of the stream for a client the ring cannot serve yet; hands over to
/// the ring once it holds everything after the client's last event.
async fn replayed(s: &mut State) -> Replayed {
    if s.log.covers(s.last_sent) {
        s.replay = None;
        return Replayed::Continue;
    }
    let Some(replay) = s.replay.as_mut() else {
        return Replayed::Continue;
    };
    tokio::select! {
        next = replay.next() => match next {
            Some(Ok(event)) => {
                if event.seq > s.last_sent {
                    // Events between are no longer kept by the stream.
                    if event.seq != s.last_sent + 1 {
                        s.pending.push_back(s.flavor.plain(&resync("missed events are no longer kept")));
                    }
                    s.last_sent = event.seq;
                    let frame = Frame { seq: event.seq, payload: event.json };
                    s.flavor.frame(&s.log, &frame, &mut s.pending);
                }
                Replayed::Continue
            }
            failed => {
                if let Some(Err(e)) = failed {
                    tracing::warn!("replaying the cluster's stream to a client failed: {e}");
                }
                s.replay = None;
                s.last_sent = s.log.join(None).after;
                Replayed::Send(s.flavor.plain(&resync("the cluster's stream could not be read")))
            }
        },
        _ = s.heartbeat.tick() => Replayed::Send(s.flavor.plain(HEARTBEAT)),
        () = s.stop.cancelled() => Replayed::End,
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use taskforce_actors::bus::{Envelope, Event};
    use taskforce_agents::id::SessionId;

    use super::*;

    fn idle(seq: u64) -> Envelope {
        Envelope {
            seq,
            event: Event::SessionIdle {
                session_id: SessionId::new(),
            },
        }
    }

    /// The ids of `frames`, as `<epoch>-<seq>` read back.
    fn ids(frames: &[Bytes]) -> Vec<Option<LastEventId>> {
        frames
            .iter()
            .map(|f| {
                let text = std::str::from_utf8(f).unwrap();
                text.strip_prefix("id: ")
                    .and_then(|rest| rest.split('\n').next())
                    .map(LastEventId::parse)
            })
            .collect()
    }

    fn id(seq: u64) -> Option<LastEventId> {
        Some(LastEventId::Id { epoch: 7, seq })
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_for_a_while_catches_up_from_the_ring() {
        let log = EventLog::new("/p".into(), 1 << 20, 7);
        let mut stream = Box::pin(stream(
            &log,
            None,
            Flavor::Local,
            Duration::from_secs(60),
            CancellationToken::new(),
        ));
        // 500 events while the client reads nothing: several batches.
        for seq in 1..=500 {
            log.push(&idle(seq));
        }
        let frames: Vec<Bytes> = (&mut stream).take(501).map(|f| f.unwrap()).collect().await;
        assert!(
            std::str::from_utf8(&frames[0])
                .unwrap()
                .contains("server.connected")
        );
        let expected: Vec<Option<LastEventId>> = (1..=500).map(id).collect();
        assert_eq!(ids(&frames[1..]), expected);
        // Live events continue after the catch-up, once each.
        log.push(&idle(501));
        let next = stream.next().await.unwrap().unwrap();
        assert_eq!(ids(&[next]), [id(501)]);
    }

    #[tokio::test]
    async fn a_stream_counts_as_delivered_once_it_asked_for_more_after_the_events() {
        use futures::FutureExt;
        let log = EventLog::new("/p".into(), 1 << 20, 7);
        let mut stream = Box::pin(stream(
            &log,
            None,
            Flavor::Global,
            Duration::from_secs(60),
            CancellationToken::new(),
        ));
        log.push(&idle(1));
        log.push(&idle(2));
        let wait = log.delivered(2, Duration::from_secs(3600));
        tokio::pin!(wait);
        assert!(
            (&mut wait).now_or_never().is_none(),
            "the stream has sent nothing"
        );
        let frames: Vec<Bytes> = (&mut stream).take(3).map(|f| f.unwrap()).collect().await;
        assert_eq!(ids(&frames[1..]), [id(1), id(2)]);
        assert!(
            (&mut wait).now_or_never().is_none(),
            "the last chunk may still be queued"
        );
        // The connection asks for more: everything before went out.
        assert!(stream.next().now_or_never().is_none());
        assert!(wait.await);
    }

    #[tokio::test]
    async fn a_client_behind_the_ring_is_told_to_resync_then_reads_on() {
        // Room for about 20 `session.idle` events.
        let log = EventLog::new("/p".into(), 20 * 200, 7);
        let mut stream = Box::pin(stream(
            &log,
            None,
            Flavor::Global,
            Duration::from_secs(60),
            CancellationToken::new(),
        ));
        for seq in 1..=60 {
            log.push(&idle(seq));
        }
        let connected = stream.next().await.unwrap().unwrap();
        assert!(
            std::str::from_utf8(&connected)
                .unwrap()
                .contains("server.connected")
        );
        let resync = stream.next().await.unwrap().unwrap();
        let text = std::str::from_utf8(&resync).unwrap();
        assert!(
            text.starts_with("data: {\"payload\":{\"type\":\"server.resync\""),
            "{text}"
        );
        log.push(&idle(61));
        let next = stream.next().await.unwrap().unwrap();
        assert_eq!(ids(&[next]), [id(61)]);
    }

    #[tokio::test]
    async fn a_large_payload_goes_out_as_kept_between_its_framing() {
        let log = EventLog::new("/p".into(), 1 << 20, 7);
        let mut out = VecDeque::new();
        let big = Frame {
            seq: 3,
            payload: Bytes::from(format!("\"{}\"", "x".repeat(10_000))),
        };
        Flavor::Global.frame(&log, &big, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].as_ptr(), big.payload.as_ptr(), "not copied");
        let whole: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
        let text = String::from_utf8(whole).unwrap();
        assert!(text.starts_with("id: 7-3\ndata: {\"directory\":\"/p\",\"payload\":\"xxx"));
        assert!(text.ends_with("xxx\"}\n\n"));
    }

    #[tokio::test]
    async fn a_stream_ends_when_the_server_stops() {
        let log = EventLog::new("/p".into(), 1 << 20, 7);
        let stop = CancellationToken::new();
        let mut stream = Box::pin(stream(
            &log,
            None,
            Flavor::Local,
            Duration::from_secs(60),
            stop.clone(),
        ));
        assert!(stream.next().await.is_some(), "server.connected");
        log.push(&idle(1));
        stop.cancel();
        assert!(stream.next().await.is_none(), "no frame after the stop");
    }
}
