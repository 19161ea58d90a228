//! Reading the server's event streams frame by frame (`Sse`), the `id:` of a frame (`EventId`),
//! and the parser of a raw frame with its own test.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::{Harness, PATIENCE};

/// An SSE frame's `id:`, `<epoch>-<seq>`: the server run, and the event's number in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventId {
    pub epoch: u64,
    pub seq: u64,
}

impl EventId {
    /// Reads `<epoch>-<seq>`.
    #[track_caller]
    pub fn parse(text: &str) -> EventId {
        let (epoch, seq) = text
            .split_once('-')
            .unwrap_or_else(|| panic!("an id is <epoch>-<seq>: {text:?}"));
        EventId {
            epoch: epoch.parse().expect("a numeric epoch"),
            seq: seq.parse().expect("a numeric sequence number"),
        }
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.epoch, self.seq)
    }
}

impl std::ops::Add<u64> for EventId {
    type Output = EventId;

    fn add(self, n: u64) -> EventId {
        EventId {
            seq: self.seq + n,
            ..self
        }
    }
}

impl std::ops::Sub<u64> for EventId {
    type Output = EventId;

    fn sub(self, n: u64) -> EventId {
        EventId {
            seq: self.seq - n,
            ..self
        }
    }
}

/// One SSE frame: its `id:` if it had one, and its `data:` as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<EventId>,
    pub data: Value,
}

impl Frame {
    /// The event type (`/event` frames, or the payload of `/global/event` frames).
    pub fn kind(&self) -> &str {
        self.data["type"]
            .as_str()
            .or_else(|| self.data["payload"]["type"].as_str())
            .unwrap_or("")
    }

    /// The event properties (of either flavor).
    pub fn properties(&self) -> &Value {
        if self.data.get("payload").is_some() {
            &self.data["payload"]["properties"]
        } else {
            &self.data["properties"]
        }
    }

    /// Whether this is a `kind` event about `session` (`sessionID` or `info.id`).
    pub fn is(&self, kind: &str, session: &str) -> bool {
        let p = self.properties();
        self.kind() == kind && (p["sessionID"] == session || p["info"]["id"] == session)
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A reader of an SSE response, frame by frame.
pub struct Sse {
    body: ByteStream,
    buffer: Vec<u8>,
}

impl Sse {
    /// Opens `GET path` as an event stream, sending `Last-Event-ID: last` when given.
    pub async fn open(h: &Harness, path: &str, last: Option<EventId>) -> Sse {
        Sse::open_raw(h, path, last.map(|id| id.to_string()).as_deref()).await
    }

    /// Opens `GET path` as an event stream, sending `Last-Event-ID` as given.
    pub async fn open_raw(h: &Harness, path: &str, last: Option<&str>) -> Sse {
        let mut builder = h.request(Method::GET, path);
        if let Some(last) = last {
            builder = builder.header("last-event-id", last);
        }
        let response = builder.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "{path} is an event stream"
        );
        Sse {
            body: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
        }
    }

    /// The next frame, if one arrives within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(frame) = parse_frame(&String::from_utf8(raw).unwrap()) {
                    return Some(frame);
                }
                continue;
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk.unwrap()),
                Ok(None) => panic!("the event stream ended"),
                Err(_) => return None,
            }
        }
    }

    /// Whether the stream ends (after any frames still on their way) within `wait`.
    pub async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(_))) => continue,
                Ok(Some(Err(_)) | None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// The next frame; fails the test when none arrives.
    pub async fn next(&mut self) -> Frame {
        self.next_within(PATIENCE)
            .await
            .expect("an event arrives in time")
    }

    /// Frames up to and including the first for which `done` holds.
    pub async fn until(&mut self, done: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next().await;
            let stop = done(&frame);
            frames.push(frame);
            if stop {
                return frames;
            }
        }
    }
}

/// A frame's `id:` and `data:` lines (`None` for a frame without data, like a comment).
fn parse_frame(raw: &str) -> Option<Frame> {
    let mut id = None;
    let mut data = Vec::new();
    for line in raw.lines() {
        if let Some(value) = line.strip_prefix("id:") {
            assert!(id.is_none(), "one id per frame: {raw:?}");
            id = Some(EventId::parse(value.trim()));
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
        } else {
            assert!(
                line.is_empty() || line.starts_with(':'),
                "unexpected SSE line {line:?} in {raw:?}"
            );
        }
    }
    if data.is_empty() {
        return None;
    }
    let data = serde_json::from_str(&data.join("\n"))
        .unwrap_or_else(|e| panic!("frame data is not JSON ({e}): {raw:?}"));
    Some(Frame { id, data })
}

#[test]
fn frames_parse_with_and_without_ids() {
    assert_eq!(
        parse_frame("id: 2-7\ndata: {\"type\":\"x\",\"properties\":{}}\n\n"),
        Some(Frame {
            id: Some(EventId { epoch: 2, seq: 7 }),
            data: serde_json::json!({"type": "x", "properties": {}})
        })
    );
    assert_eq!(parse_frame("data: {\"a\":1}\n\n").map(|f| f.id), Some(None));
    assert_eq!(parse_frame(": comment\n\n"), None);
}
