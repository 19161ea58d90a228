//! A fake Anthropic Messages API server on 127.0.0.1 for tests.
//!
//! [`FakeAnthropic::start`] binds a random local port and answers every HTTP request with what a
//! handler closure returns for it; every request is recorded ([`RecordedRequest`]: method, path,
//! headers, JSON body). It shares the HTTP machinery of [`fake_openai`](crate::fake_openai) and
//! speaks Anthropic's wire format: streams are `event: <type>` / `data: <json>` frames
//! (`message_start`, `content_block_start` for `text` / `thinking` / `tool_use`,
//! `content_block_delta` with `text_delta` / `thinking_delta` / `signature_delta` /
//! `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`, `error`),
//! built with the frame functions of this module or the ready-made [`Response`]s; errors are
//! statuses with Anthropic's body `{"type": "error", "error": {"type", "message"}}`
//! ([`Response::error`], [`Response::overloaded`] (529), [`Response::rate_limited`] (429 with
//! `retry-after`), [`Response::prompt_too_long`]). [`Response::cut_after`] hangs up mid-stream.
//!
//! It uses real time: don't drive it from a test with a paused tokio clock.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use taskforce_testkit::fake_anthropic::{FakeAnthropic, Response};
//! let server = FakeAnthropic::start(|_req| Response::text("Hello there")).await?;
//! // point an `anthropic` provider at server.base_url()
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use taskforce_agents::provider::Usage;

use crate::fake_openai::server::pop_or;
use crate::fake_openai::{self, FakeOpenAi, halves};

pub use crate::fake_openai::{Chunk, RecordedRequest};

/// The signature the fake puts on thinking blocks.
pub const FAKE_SIGNATURE: &str = "fake-signature";

/// What the server answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// `200 OK` with an event stream of these frames.
    Stream(Vec<Chunk>),
    /// A status with headers and a body.
    Status(u16, Vec<(String, String)>, String),
}

impl Response {
    /// A complete streamed text answer (input 10 tokens, one output token per word).
    pub fn text(text: &str) -> Response {
        let words = text.split_inclusive(' ').count() as u64;
        Response::text_with_usage(
            text,
            Usage {
                input: 10,
                output: words,
                ..Usage::default()
            },
        )
    }

    /// A complete streamed text answer reporting `usage` (`reasoning` is not on the wire).
    pub fn text_with_usage(text: &str, usage: Usage) -> Response {
        let mut frames = vec![message_start(usage), ping()];
        frames.extend(text_block(0, text));
        frames.push(message_delta("end_turn", usage.output));
        frames.push(message_stop());
        Response::Stream(frames)
    }

    /// A streamed answer that thinks first (a signed thinking block), then answers `text`.
    pub fn thinking(thinking: &str, text: &str) -> Response {
        let mut frames = vec![message_start(Usage {
            input: 10,
            ..Usage::default()
        })];
        frames.push(thinking_start(0));
        frames.extend(
            thinking
                .split_inclusive(' ')
                .map(|piece| thinking_delta(0, piece)),
        );
        frames.push(signature_delta(0, FAKE_SIGNATURE));
        frames.push(block_stop(0));
        frames.extend(text_block(1, text));
        frames.push(message_delta("end_turn", 20));
        frames.push(message_stop());
        Response::Stream(frames)
    }

    /// A streamed answer calling tools `(id, name, input JSON)` after an optional text, each
    /// input split in two `input_json_delta` pieces; stop reason `tool_use`.
    pub fn tool_use(text: Option<&str>, calls: &[(&str, &str, &str)]) -> Response {
        let mut frames = vec![message_start(Usage {
            input: 10,
            ..Usage::default()
        })];
        let mut index = 0;
        if let Some(text) = text {
            frames.extend(text_block(index, text));
            index += 1;
        }
        for (id, name, input) in calls {
            frames.push(tool_use_start(index, id, name));
            for piece in halves(input) {
                frames.push(input_json_delta(index, piece));
            }
            frames.push(block_stop(index));
            index += 1;
        }
        frames.push(message_delta("tool_use", 5 * calls.len() as u64));
        frames.push(message_stop());
        Response::Stream(frames)
    }

    /// An error status with Anthropic's body: `error_type` is e.g. `invalid_request_error`.
    pub fn error(status: u16, error_type: &str, message: &str) -> Response {
        Response::Status(
            status,
            Vec::new(),
            error_body(error_type, message).to_string(),
        )
    }

    /// `529 overloaded_error`.
    pub fn overloaded() -> Response {
        Response::error(529, "overloaded_error", "Overloaded")
    }

    /// `429 rate_limit_error` asking to wait `seconds` (`retry-after`).
    pub fn rate_limited(seconds: u64) -> Response {
        Response::error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        )
        .with_header("retry-after", &seconds.to_string())
    }

    /// `400 invalid_request_error` saying the prompt is too long.
    pub fn prompt_too_long(tokens: u64, maximum: u64) -> Response {
        Response::error(
            400,
            "invalid_request_error",
            &format!("prompt is too long: {tokens} tokens > {maximum} maximum"),
        )
    }

    /// A stream that starts, then fails with an `error` event of `error_type`.
    pub fn stream_error(error_type: &str, message: &str) -> Response {
        Response::Stream(vec![
            message_start(Usage::default()),
            error_event(error_type, message),
        ])
    }

    /// Adds a response header (status responses only; streams ignore it).
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        if let Response::Status(_, headers, _) = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Waits `delay` before every frame of a stream.
    pub fn with_delay(self, delay: Duration) -> Response {
        self.map_stream(|frames| {
            frames
                .into_iter()
                .flat_map(|c| match c {
                    Chunk::Data(_) | Chunk::Frame(_) => vec![Chunk::Sleep(delay), c],
                    other => vec![other],
                })
                .collect()
        })
    }

    /// Sends only the first `k` frames of a stream, then drops the connection (a cut network).
    pub fn cut_after(self, k: usize) -> Response {
        self.map_stream(|frames| {
            let mut out = first_frames(frames, k);
            out.push(Chunk::Hangup);
            out
        })
    }

    /// Sends only the first `k` frames of a stream, then stalls until the client leaves.
    pub fn stall_after(self, k: usize) -> Response {
        self.map_stream(|frames| {
            let mut out = first_frames(frames, k);
            out.push(Chunk::Stall);
            out
        })
    }

    /// Applies `f` to the frames of a stream; statuses stay as they are.
    fn map_stream(self, f: impl FnOnce(Vec<Chunk>) -> Vec<Chunk>) -> Response {
        match self {
            Response::Stream(frames) => Response::Stream(f(frames)),
            other => other,
        }
    }
}

impl From<Response> for fake_openai::Response {
    fn from(r: Response) -> Self {
        match r {
            Response::Stream(frames) => fake_openai::Response::Stream(frames),
            Response::Status(status, headers, body) => {
                fake_openai::Response::Status(status, headers, body)
            }
        }
    }
}

/// The steps of `frames` up to (not including) the `k+1`-th frame.
fn first_frames(frames: Vec<Chunk>, k: usize) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut sent = 0;
    for c in frames {
        let is_frame = matches!(c, Chunk::Data(_) | Chunk::Frame(_));
        if is_frame && sent == k {
            break;
        }
        sent += usize::from(is_frame);
        out.push(c);
    }
    out
}

/// Anthropic's error body.
pub fn error_body(error_type: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message}})
}

/// A frame `event: <name>` carrying `data` as JSON.
pub fn event(name: &str, data: &Value) -> Chunk {
    Chunk::Frame(format!("event: {name}\ndata: {data}\n\n"))
}

/// `message_start` with the input counts of `usage` (and one output token).
pub fn message_start(usage: Usage) -> Chunk {
    event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
            "model": "claude-fake", "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": usage.input,
                "cache_creation_input_tokens": usage.cache_write,
                "cache_read_input_tokens": usage.cache_read,
                "output_tokens": 1,
            },
        }}),
    )
}

/// `ping`.
pub fn ping() -> Chunk {
    event("ping", &json!({"type": "ping"}))
}

/// `content_block_start` of block `index` with `block`.
pub fn block_start(index: u64, block: Value) -> Chunk {
    event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

/// `content_block_delta` of block `index` with `delta`.
pub fn block_delta(index: u64, delta: Value) -> Chunk {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

/// `content_block_stop` of block `index`.
pub fn block_stop(index: u64) -> Chunk {
    event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

/// An empty text block opens.
pub fn text_start(index: u64) -> Chunk {
    block_start(index, json!({"type": "text", "text": ""}))
}

/// A `text_delta`.
pub fn text_delta(index: u64, text: &str) -> Chunk {
    block_delta(index, json!({"type": "text_delta", "text": text}))
}

/// An empty thinking block opens.
pub fn thinking_start(index: u64) -> Chunk {
    block_start(
        index,
        json!({"type": "thinking", "thinking": "", "signature": ""}),
    )
}

/// A `thinking_delta`.
pub fn thinking_delta(index: u64, thinking: &str) -> Chunk {
    block_delta(
        index,
        json!({"type": "thinking_delta", "thinking": thinking}),
    )
}

/// A `signature_delta` (sent just before a thinking block stops).
pub fn signature_delta(index: u64, signature: &str) -> Chunk {
    block_delta(
        index,
        json!({"type": "signature_delta", "signature": signature}),
    )
}

/// A `tool_use` block opens with an empty input.
pub fn tool_use_start(index: u64, id: &str, name: &str) -> Chunk {
    block_start(
        index,
        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
    )
}

/// An `input_json_delta` piece of a tool's input.
pub fn input_json_delta(index: u64, partial_json: &str) -> Chunk {
    block_delta(
        index,
        json!({"type": "input_json_delta", "partial_json": partial_json}),
    )
}

/// `message_delta` with the stop reason and the output tokens.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> Chunk {
    event(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
    )
}

/// `message_stop`.
pub fn message_stop() -> Chunk {
    event("message_stop", &json!({"type": "message_stop"}))
}

/// An `error` event.
pub fn error_event(error_type: &str, message: &str) -> Chunk {
    event("error", &error_body(error_type, message))
}

/// A whole text block: start, word deltas, stop.
fn text_block(index: u64, text: &str) -> Vec<Chunk> {
    let mut frames = vec![text_start(index)];
    frames.extend(text.split_inclusive(' ').map(|w| text_delta(index, w)));
    frames.push(block_stop(index));
    frames
}

/// A running fake Anthropic server; dropping it stops it.
#[derive(Debug)]
pub struct FakeAnthropic {
    inner: FakeOpenAi,
}

impl FakeAnthropic {
    /// Starts a server answering each request with `handler(request)`.
    pub async fn start<F>(handler: F) -> std::io::Result<FakeAnthropic>
    where
        F: Fn(&RecordedRequest) -> Response + Send + Sync + 'static,
    {
        let inner = FakeOpenAi::start(move |r| handler(r).into()).await?;
        Ok(FakeAnthropic { inner })
    }

    /// Starts a server answering requests with `responses` in order; once they are used up it
    /// answers 500 `api_error`.
    pub async fn queue(responses: Vec<Response>) -> std::io::Result<FakeAnthropic> {
        let queue = Mutex::new(VecDeque::from(responses));
        FakeAnthropic::start(move |_| {
            pop_or(&queue, || {
                Response::error(500, "api_error", "FakeAnthropic: no scripted response left")
            })
        })
        .await
    }

    /// The base URL to configure, `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        self.inner.base_url()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner.requests()
    }

    /// How many clients went away before their response was fully sent.
    pub fn disconnects(&self) -> usize {
        self.inner.disconnects()
    }

    /// Waits until at least `n` disconnects were seen; false if `timeout` passed first.
    pub async fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> bool {
        self.inner.wait_for_disconnects(n, timeout).await
    }

    /// Waits until at least `n` requests were received; false if `timeout` passed first.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.inner.wait_for_requests(n, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(r: &Response) -> Vec<&Chunk> {
        match r {
            Response::Stream(f) => f.iter().collect(),
            Response::Status(..) => Vec::new(),
        }
    }

    #[test]
    fn frames_name_their_event() {
        let Chunk::Frame(f) = message_stop() else {
            panic!("not a frame")
        };
        assert_eq!(
            f,
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
    }

    #[test]
    fn cut_after_keeps_k_frames_then_hangs_up() {
        let r = Response::text("a b c").cut_after(3);
        let f = frames(&r);
        assert_eq!(f.len(), 4);
        assert_eq!(f.last(), Some(&&Chunk::Hangup));
    }

    #[test]
    fn errors_carry_anthropic_bodies() {
        let Response::Status(status, headers, body) = Response::rate_limited(2) else {
            panic!("not a status")
        };
        assert_eq!(status, 429);
        assert_eq!(headers, vec![("retry-after".to_string(), "2".to_string())]);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert!(matches!(Response::overloaded(), Response::Status(529, ..)));
    }
}
