//! The SSE streams `/event` and `/global/event`: `server.connected` first, a heartbeat every
//! period, then each event with its bus sequence number as `id:`; a client that sends
//! `Last-Event-ID` first gets what it missed, or `server.resync` when that is gone. A stream
//! ends when the server stops.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::{Instant, Interval, interval_at};
use tokio_util::sync::CancellationToken;

use super::events::{EventLog, Item};

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
}

const CONNECTED: &str = r#"{"type":"server.connected","properties":{}}"#;
const HEARTBEAT: &str = r#"{"type":"server.heartbeat","properties":{}}"#;

fn resync(reason: &str) -> String {
    format!(r#"{{"type":"server.resync","properties":{{"reason":"{reason}"}}}}"#)
}

/// The `Last-Event-ID` a reconnecting client sent, if it is a number.
pub fn last_event_id(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The SSE response for one client.
pub fn respond(
    log: &EventLog,
    last: Option<u64>,
    flavor: Flavor,
    heartbeat: Duration,
    stop: CancellationToken,
) -> Response {
    let body = Body::from_stream(stream(log, last, flavor, heartbeat, stop));
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
    pending: VecDeque<Bytes>,
    live: tokio::sync::broadcast::Receiver<Item>,
    last_sent: u64,
    heartbeat: Interval,
    stop: CancellationToken,
}

fn stream(
    log: &EventLog,
    last: Option<u64>,
    flavor: Flavor,
    heartbeat: Duration,
    stop: CancellationToken,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let start = log.join(last);
    let mut pending = VecDeque::new();
    pending.push_back(flavor.plain(CONNECTED));
    let mut last_sent = last.unwrap_or(0);
    if start.gone {
        pending.push_back(flavor.plain(&resync("missed events are no longer kept")));
        last_sent = 0;
    }
    for frame in &start.backlog {
        pending.push_back(pick(frame, flavor));
        last_sent = frame.seq;
    }
    let state = State {
        log: log.clone(),
        flavor,
        pending,
        live: start.live,
        last_sent,
        heartbeat: interval_at(Instant::now() + heartbeat, heartbeat),
        stop,
    };
    futures::stream::unfold(state, |mut s| async move {
        let next = next_frame(&mut s).await?;
        Some((Ok(next), s))
    })
}

fn pick(frame: &super::events::Frame, flavor: Flavor) -> Bytes {
    match flavor {
        Flavor::Local => frame.local.clone(),
        Flavor::Global => frame.global.clone(),
    }
}

async fn next_frame(s: &mut State) -> Option<Bytes> {
    loop {
        if s.stop.is_cancelled() {
            return None;
        }
        if let Some(next) = s.pending.pop_front() {
            return Some(next);
        }
        tokio::select! {
            item = s.live.recv() => match item {
                Ok(Item::Frame(frame)) => {
                    if frame.seq > s.last_sent {
                        s.last_sent = frame.seq;
                        return Some(pick(&frame, s.flavor));
                    }
                }
                Ok(Item::Gap) => {
                    s.last_sent = 0;
                    return Some(s.flavor.plain(&resync("the server fell behind")));
                }
                // This client fell behind: catch up from the ring when it still has the events.
                Err(RecvError::Lagged(_)) => match s.log.since(s.last_sent) {
                    Some(frames) => {
                        for frame in frames {
                            s.last_sent = frame.seq;
                            s.pending.push_back(pick(&frame, s.flavor));
                        }
                    }
                    None => {
                        s.last_sent = 0;
                        return Some(s.flavor.plain(&resync("the client fell behind")));
                    }
                },
                Err(RecvError::Closed) => return None,
            },
            _ = s.heartbeat.tick() => return Some(s.flavor.plain(HEARTBEAT)),
            () = s.stop.cancelled() => return None,
        }
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

    fn ids(frames: &[Bytes]) -> Vec<Option<u64>> {
        frames
            .iter()
            .map(|f| {
                let text = std::str::from_utf8(f).unwrap();
                text.strip_prefix("id: ")
                    .and_then(|rest| rest.split('\n').next())
                    .and_then(|n| n.parse().ok())
            })
            .collect()
    }

    #[tokio::test]
    async fn a_client_behind_the_live_channel_catches_up_from_the_ring_without_a_gap() {
        let log = EventLog::new("/p".into(), 100);
        let mut stream = Box::pin(stream(
            &log,
            None,
            Flavor::Local,
            Duration::from_secs(60),
            CancellationToken::new(),
        ));
        // 50 events while the client reads nothing: more than the live channel holds (16).
        for seq in 1..=50 {
            log.push(&idle(seq));
        }
        let frames: Vec<Bytes> = (&mut stream).take(51).map(|f| f.unwrap()).collect().await;
        assert!(
            std::str::from_utf8(&frames[0])
                .unwrap()
                .contains("server.connected")
        );
        let expected: Vec<Option<u64>> = (1..=50).map(Some).collect();
        assert_eq!(ids(&frames[1..]), expected);
        // Live events continue after the catch-up, once each.
        log.push(&idle(51));
        let next = stream.next().await.unwrap().unwrap();
        assert_eq!(ids(&[next]), [Some(51)]);
    }

    #[tokio::test]
    async fn a_client_behind_the_ring_too_is_told_to_resync() {
        let log = EventLog::new("/p".into(), 20);
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
    }

    #[tokio::test]
    async fn a_stream_ends_when_the_server_stops() {
        let log = EventLog::new("/p".into(), 100);
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
