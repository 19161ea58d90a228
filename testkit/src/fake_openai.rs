//! A fake OpenAI-compatible server on 127.0.0.1 for tests.
//!
//! [`FakeOpenAi::start`] binds a random local port and answers every HTTP request with what a
//! handler closure returns for it; every request is recorded (method, path, headers, JSON body)
//! for assertions. Responses are either an event stream in the real `chat.completion.chunk`
//! wire format ([`Response::Stream`], built from [`Chunk`]s) or a plain status with a body
//! ([`Response::Status`]). Streams are sent with `Transfer-Encoding: chunked` and
//! `Connection: close`, one SSE frame per HTTP chunk; [`Chunk::Sleep`] paces them,
//! [`Chunk::Stall`] keeps the connection open without sending more (for cancellation tests) and
//! [`Chunk::Hangup`] drops the connection without finishing the body (a cut network).
//!
//! When a client goes away before its response was fully sent, the server counts a disconnect
//! ([`FakeOpenAi::disconnects`], [`FakeOpenAi::wait_for_disconnects`]).
//!
//! It speaks just enough HTTP/1.1 for reqwest: one request per connection, a `Content-Length`
//! body. It uses real time: don't drive it from a test with a paused tokio clock.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
//! let server = FakeOpenAi::start(|_req| Response::text("Hello there")).await?;
//! // point an `openai` provider at server.base_url()
//! # Ok(()) }
//! ```

use std::time::Duration;

use serde_json::{Value, json};

pub(crate) mod server;

pub use server::FakeOpenAi;

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The HTTP method (`POST`).
    pub method: String,
    /// The request target (`/v1/chat/completions`).
    pub path: String,
    /// The headers in order, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
}

impl RecordedRequest {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The `messages` of a chat-completions body.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The `role` of the last message.
    pub fn last_role(&self) -> Option<&str> {
        self.messages().last()?.get("role")?.as_str()
    }

    /// The names of the offered tools (OpenAI's `function.name`, or Anthropic's `name`).
    pub fn tool_names(&self) -> Vec<&str> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The description of the offered tool `name` (OpenAI's `function.description`, or
    /// Anthropic's `description`).
    pub fn tool_description(&self, name: &str) -> Option<&str> {
        self.body["tools"].as_array()?.iter().find_map(|t| {
            let function = if t["function"].is_object() {
                &t["function"]
            } else {
                t
            };
            (function["name"] == name)
                .then(|| function["description"].as_str())
                .flatten()
        })
    }

    /// Whether the raw body contains `needle` (handy to answer by prompt).
    pub fn contains(&self, needle: &str) -> bool {
        self.raw_body.contains(needle)
    }
}

/// The first of `headers` named `name` (any case).
pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// What the server answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// `200 OK` with an event stream of these chunks.
    Stream(Vec<Chunk>),
    /// A status with headers and a body (`Content-Type` defaults to JSON or plain text).
    Status(u16, Vec<(String, String)>, String),
    /// Nothing at all: the request is read, then the server says nothing (not even the
    /// response headers) until the client leaves.
    Hang,
}

impl Response {
    /// A complete streamed text answer: word deltas, `stop`, usage, `[DONE]`.
    pub fn text(text: &str) -> Response {
        let mut chunks = vec![Chunk::role()];
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        chunks.extend(words.iter().map(|w| Chunk::text(w)));
        chunks.push(Chunk::finish("stop"));
        chunks.push(Chunk::usage(10, words.len() as u64));
        chunks.push(Chunk::done());
        Response::Stream(chunks)
    }

    /// A complete streamed answer making parallel tool calls `(id, name, arguments JSON)`, the
    /// arguments split in two pieces each: `tool_calls`, usage, `[DONE]`.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Response {
        let mut chunks = vec![Chunk::role()];
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            let index = index as u64;
            chunks.push(Chunk::tool_call_start(index, id, name));
            for piece in halves(arguments) {
                chunks.push(Chunk::tool_call_args(index, piece));
            }
        }
        chunks.push(Chunk::finish("tool_calls"));
        chunks.push(Chunk::usage(10, 5 * calls.len() as u64));
        chunks.push(Chunk::done());
        Response::Stream(chunks)
    }

    /// An error status with an OpenAI-style JSON body carrying `message`.
    pub fn error(status: u16, message: &str) -> Response {
        let body = json!({"error": {"message": message, "type": "error", "code": null}});
        Response::Status(status, Vec::new(), body.to_string())
    }

    /// A status with a body as is.
    pub fn status(status: u16, body: impl Into<String>) -> Response {
        Response::Status(status, Vec::new(), body.into())
    }

    /// Adds a response header (status responses only; streams ignore it).
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        if let Response::Status(_, headers, _) = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Waits `delay` before the first frame of a stream (a model slow to start answering).
    pub fn after(self, delay: Duration) -> Response {
        match self {
            Response::Stream(mut chunks) => {
                chunks.insert(0, Chunk::Sleep(delay));
                Response::Stream(chunks)
            }
            other => other,
        }
    }

    /// Waits until `gate` opens before the first frame of a stream (a model that answers when
    /// the test says so).
    pub fn until(self, gate: &Gate) -> Response {
        match self {
            Response::Stream(mut chunks) => {
                chunks.insert(0, Chunk::Wait(gate.clone()));
                Response::Stream(chunks)
            }
            other => other,
        }
    }

    /// Waits `delay` before every data frame of a stream.
    pub fn with_delay(self, delay: Duration) -> Response {
        match self {
            Response::Stream(chunks) => Response::Stream(
                chunks
                    .into_iter()
                    .flat_map(|c| match c {
                        Chunk::Data(_) | Chunk::Frame(_) => vec![Chunk::Sleep(delay), c],
                        other => vec![other],
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// Sends only the first `k` data frames of a stream, then stalls until the client leaves.
    pub fn stall_after(self, k: usize) -> Response {
        match self {
            Response::Stream(chunks) => {
                let mut out = Vec::new();
                let mut sent = 0;
                for c in chunks {
                    if sent == k {
                        break;
                    }
                    if matches!(c, Chunk::Data(_) | Chunk::Frame(_)) {
                        sent += 1;
                    }
                    out.push(c);
                }
                out.push(Chunk::Stall);
                Response::Stream(out)
            }
            other => other,
        }
    }
}

/// `text` cut in two at a character boundary near its middle, empty pieces left out.
pub(crate) fn halves(text: &str) -> impl Iterator<Item = &str> {
    let mid = (0..=text.len() / 2)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let (a, b) = text.split_at(mid);
    [a, b].into_iter().filter(|p| !p.is_empty())
}

/// One step of a streamed response.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// A frame `data: <payload>\n\n`.
    Data(String),
    /// A whole server-sent-event frame written as is (`event: …\ndata: …\n\n`).
    Frame(String),
    /// Wait before the next step.
    Sleep(Duration),
    /// Send nothing more and keep the connection open until the client closes it.
    Stall,
    /// Close the connection at once, without ending the chunked body.
    Hangup,
    /// Wait until the test opens the gate.
    Wait(Gate),
}

/// A gate a test opens when it is ready: streams that wait on it ([`Response::until`]) go on
/// from then, and at once once it is open.
#[derive(Debug, Clone, Default)]
pub struct Gate(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Opens the gate for every stream waiting on it now or later.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Resolves once the gate is open.
    pub async fn opened(&self) {
        let mut open = self.0.subscribe();
        // The sender lives as long as `self`: the wait ends only by opening.
        let _ = open.wait_for(|o| *o).await;
    }
}

impl PartialEq for Gate {
    fn eq(&self, other: &Gate) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Chunk {
    /// A `chat.completion.chunk` with one choice carrying `delta` and `finish_reason`.
    pub fn choice(delta: Value, finish_reason: Option<&str>) -> Chunk {
        Chunk::json(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }))
    }

    /// A frame carrying `value` as JSON.
    pub fn json(value: Value) -> Chunk {
        Chunk::Data(value.to_string())
    }

    /// A frame carrying `payload` as is (for malformed data).
    pub fn raw(payload: &str) -> Chunk {
        Chunk::Data(payload.to_string())
    }

    /// The first delta of an answer: `{"role": "assistant", "content": ""}`.
    pub fn role() -> Chunk {
        Chunk::choice(json!({"role": "assistant", "content": ""}), None)
    }

    /// A text delta.
    pub fn text(text: &str) -> Chunk {
        Chunk::choice(json!({"content": text}), None)
    }

    /// A reasoning delta (`reasoning_content`, as DeepSeek and vLLM send it).
    pub fn reasoning(text: &str) -> Chunk {
        Chunk::choice(json!({"reasoning_content": text}), None)
    }

    /// The first piece of tool call `index`: its id and name, empty arguments.
    pub fn tool_call_start(index: u64, id: &str, name: &str) -> Chunk {
        Chunk::choice(
            json!({"tool_calls": [{
                "index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            None,
        )
    }

    /// A piece of the arguments of tool call `index`.
    pub fn tool_call_args(index: u64, piece: &str) -> Chunk {
        Chunk::choice(
            json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
            None,
        )
    }

    /// The finish chunk (`stop`, `length`, `tool_calls`, `content_filter`).
    pub fn finish(reason: &str) -> Chunk {
        Chunk::choice(json!({}), Some(reason))
    }

    /// The usage chunk (no choices), as `stream_options.include_usage` asks for.
    pub fn usage(prompt_tokens: u64, completion_tokens: u64) -> Chunk {
        Chunk::usage_detailed(prompt_tokens, completion_tokens, 0, 0)
    }

    /// The usage chunk with cached prompt tokens and reasoning tokens.
    pub fn usage_detailed(
        prompt_tokens: u64,
        completion_tokens: u64,
        cached_tokens: u64,
        reasoning_tokens: u64,
    ) -> Chunk {
        Chunk::json(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
            },
        }))
    }

    /// The end marker `data: [DONE]`.
    pub fn done() -> Chunk {
        Chunk::Data("[DONE]".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_after_keeps_k_frames() {
        let r = Response::text("a b c d").stall_after(2);
        let Response::Stream(chunks) = r else {
            panic!("not a stream")
        };
        assert_eq!(
            chunks
                .iter()
                .filter(|c| matches!(c, Chunk::Data(_)))
                .count(),
            2
        );
        assert_eq!(chunks.last(), Some(&Chunk::Stall));
    }

    #[test]
    fn tool_call_arguments_are_split() {
        let Response::Stream(chunks) = Response::tool_calls(&[("a", "t", "{\"é\":1}")]) else {
            panic!("not a stream")
        };
        // role, start, two argument pieces, finish, usage, done
        assert_eq!(chunks.len(), 7);
    }
}
