//! The SSE streams `/event` and `/global/event`: `server.connected` first, a heartbeat every
//! period, then each event with its bus sequence number as `id:`; a client that sends
//! `Last-Event-ID` first gets what it missed, or `server.resync` when that is gone.

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
pub fn respond(log: &EventLog, last: Option<u64>, flavor: Flavor, heartbeat: Duration) -> Response {
    let body = Body::from_stream(stream(log, last, flavor, heartbeat));
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
}

fn stream(
    log: &EventLog,
    last: Option<u64>,
    flavor: Flavor,
    heartbeat: Duration,
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
        }
    }
}
