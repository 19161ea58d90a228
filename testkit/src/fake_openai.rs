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

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The most header bytes a request may have.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// How long a finished connection waits for the client to close first.
const LINGER: Duration = Duration::from_secs(2);

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
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
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

    /// Whether the raw body contains `needle` (handy to answer by prompt).
    pub fn contains(&self, needle: &str) -> bool {
        self.raw_body.contains(needle)
    }
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
            let mid = (0..=arguments.len() / 2)
                .rev()
                .find(|i| arguments.is_char_boundary(*i))
                .unwrap_or(0);
            let (a, b) = arguments.split_at(mid);
            for piece in [a, b].into_iter().filter(|p| !p.is_empty()) {
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

/// The answering closure.
type Handler = dyn Fn(&RecordedRequest) -> Response + Send + Sync;

/// What the connections share.
struct Shared {
    handler: Box<Handler>,
    requests: Mutex<Vec<RecordedRequest>>,
    disconnects: AtomicUsize,
    /// Responses written to their end.
    completed: AtomicUsize,
    /// Responses being written now, and the most at once so far.
    active: AtomicUsize,
    peak: AtomicUsize,
    changed: Notify,
}

/// A running fake server; dropping it stops it.
pub struct FakeOpenAi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    accept: JoinHandle<()>,
}

impl fmt::Debug for FakeOpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeOpenAi")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.accept.abort();
    }
}

impl FakeOpenAi {
    /// Starts a server answering each request with `handler(request)`.
    pub async fn start<F>(handler: F) -> std::io::Result<FakeOpenAi>
    where
        F: Fn(&RecordedRequest) -> Response + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            handler: Box::new(handler),
            requests: Mutex::new(Vec::new()),
            disconnects: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            changed: Notify::new(),
        });
        let shutdown = CancellationToken::new();
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), shutdown.clone()));
        Ok(FakeOpenAi {
            addr,
            shared,
            shutdown,
            accept,
        })
    }

    /// Starts a server answering requests with `responses` in order; once they are used up it
    /// answers 500.
    pub async fn queue(responses: Vec<Response>) -> std::io::Result<FakeOpenAi> {
        let queue = Mutex::new(VecDeque::from(responses));
        FakeOpenAi::start(move |_| {
            queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front()
                .unwrap_or_else(|| Response::error(500, "FakeOpenAi: no scripted response left"))
        })
        .await
    }

    /// The base URL to configure, `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many clients went away before their response was fully sent.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// The most responses that were being written at the same time so far (overlapping
    /// requests).
    pub fn peak_active(&self) -> usize {
        self.shared.peak.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` responses were written to their end; false if `timeout` passed
    /// first.
    pub async fn wait_for_completed(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || {
            self.shared.completed.load(Ordering::SeqCst) >= n
        })
        .await
    }

    /// Waits until at least `n` disconnects were seen; false if `timeout` passed first.
    pub async fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.disconnects() >= n).await
    }

    /// Waits until at least `n` requests were received; false if `timeout` passed first.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || {
            self.shared
                .requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
                >= n
        })
        .await
    }

    /// Waits until `done()` holds, re-checking whenever the server records something.
    async fn wait_until(&self, timeout: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            if done() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done();
            }
        }
    }
}

/// Accepts connections until shutdown, serving each on its own task.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((socket, _)) => {
                tokio::spawn(serve(socket, shared.clone(), shutdown.clone()));
            }
            Err(e) => {
                tracing::debug!("fake openai: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// How writing a response ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Fully sent.
    Complete,
    /// The client went away first.
    ClientGone,
    /// The server stopped, or hung up on purpose.
    Stopped,
}

/// Serves one connection: one request, one response.
async fn serve(socket: TcpStream, shared: Arc<Shared>, shutdown: CancellationToken) {
    let _ = socket.set_nodelay(true);
    let (mut reader, mut writer) = socket.into_split();
    let request = match read_request(&mut reader).await {
        Ok(Some(request)) => request,
        Ok(None) => return,
        Err(e) => {
            tracing::debug!("fake openai: bad request: {e}");
            let _ = write_status(&mut writer, 400, &[], &e).await;
            return;
        }
    };
    shared
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request.clone());
    shared.changed.notify_waiters();
    let response = (shared.handler)(&request);
    let now = shared.active.fetch_add(1, Ordering::SeqCst) + 1;
    shared.peak.fetch_max(now, Ordering::SeqCst);

    // The client closing its end shows up as end-of-file on the read half.
    let closed = CancellationToken::new();
    let watcher = tokio::spawn(watch_close(reader, closed.clone()));
    let outcome = match response {
        Response::Status(status, headers, body) => {
            match write_status(&mut writer, status, &headers, &body).await {
                Ok(()) => Outcome::Complete,
                Err(_) => Outcome::ClientGone,
            }
        }
        Response::Stream(chunks) => write_stream(&mut writer, chunks, &closed, &shutdown).await,
        Response::Hang => {
            tokio::select! {
                _ = closed.cancelled() => Outcome::ClientGone,
                _ = shutdown.cancelled() => Outcome::Stopped,
            }
        }
    };
    shared.active.fetch_sub(1, Ordering::SeqCst);
    match outcome {
        Outcome::ClientGone => {
            shared.disconnects.fetch_add(1, Ordering::SeqCst);
            shared.changed.notify_waiters();
        }
        Outcome::Complete => {
            // Close our side, then give the client a moment to close first (a clean close).
            let _ = writer.shutdown().await;
            shared.completed.fetch_add(1, Ordering::SeqCst);
            shared.changed.notify_waiters();
            tokio::select! {
                _ = closed.cancelled() => {}
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(LINGER) => {}
            }
        }
        Outcome::Stopped => {}
    }
    watcher.abort();
}

/// Reads until the client closes the connection (or it fails), then cancels `closed`.
async fn watch_close(mut reader: OwnedReadHalf, closed: CancellationToken) {
    let mut buf = [0u8; 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    closed.cancel();
}

/// Reads one request: headers, then a `Content-Length` body. `None` when the client sent
/// nothing.
async fn read_request(reader: &mut OwnedReadHalf) -> Result<Option<RecordedRequest>, String> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEADER_BYTES {
            return Err("request headers too large".into());
        }
        let n = reader.read(&mut tmp).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("connection closed inside the headers".into())
            };
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split_whitespace();
    let method = request_line.next().unwrap_or("").to_string();
    let path = request_line.next().unwrap_or("").to_string();
    if method.is_empty() || path.is_empty() {
        return Err("malformed request line".into());
    }
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"))
    {
        return Err("chunked request bodies are not supported".into());
    }
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse().map_err(|_| "bad content-length".to_string()))
        .transpose()?
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < length {
        let n = reader.read(&mut tmp).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed inside the body".into());
        }
        body.extend_from_slice(&tmp[..n]);
    }
    body.truncate(length);
    let raw_body = String::from_utf8_lossy(&body).to_string();
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
    }))
}

/// The position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Writes a complete status response.
async fn write_status(
    writer: &mut OwnedWriteHalf,
    status: u16,
    headers: &[(String, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        let kind = if body.trim_start().starts_with(['{', '[']) {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        };
        head.push_str(&format!("Content-Type: {kind}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    writer.write_all(head.as_bytes()).await?;
    writer.write_all(body.as_bytes()).await?;
    writer.flush().await
}

/// Writes an event stream, step by step, watching for the client leaving.
async fn write_stream(
    writer: &mut OwnedWriteHalf,
    chunks: Vec<Chunk>,
    closed: &CancellationToken,
    shutdown: &CancellationToken,
) -> Outcome {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if writer.write_all(head.as_bytes()).await.is_err() {
        return Outcome::ClientGone;
    }
    for chunk in chunks {
        if closed.is_cancelled() {
            return Outcome::ClientGone;
        }
        match chunk {
            Chunk::Data(payload) => {
                if write_frame(writer, &format!("data: {payload}\n\n"))
                    .await
                    .is_err()
                {
                    return Outcome::ClientGone;
                }
            }
            Chunk::Frame(frame) => {
                if write_frame(writer, &frame).await.is_err() {
                    return Outcome::ClientGone;
                }
            }
            Chunk::Sleep(delay) => {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = closed.cancelled() => return Outcome::ClientGone,
                    _ = shutdown.cancelled() => return Outcome::Stopped,
                }
            }
            Chunk::Stall => {
                tokio::select! {
                    _ = closed.cancelled() => return Outcome::ClientGone,
                    _ = shutdown.cancelled() => return Outcome::Stopped,
                }
            }
            Chunk::Hangup => return Outcome::Stopped,
        }
    }
    match writer.write_all(b"0\r\n\r\n").await {
        Ok(()) => Outcome::Complete,
        Err(_) => Outcome::ClientGone,
    }
}

/// Writes one frame as one HTTP chunk.
async fn write_frame(writer: &mut OwnedWriteHalf, frame: &str) -> std::io::Result<()> {
    let bytes = format!("{:x}\r\n{frame}\r\n", frame.len());
    writer.write_all(bytes.as_bytes()).await?;
    writer.flush().await
}

/// The reason phrase of a status.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
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
