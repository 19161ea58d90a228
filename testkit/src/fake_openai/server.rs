//! The fake OpenAI server itself: accepting connections, reading one request each, writing
//! the scripted response and counting what happened.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Chunk, RecordedRequest, Response};

/// The most header bytes a request may have.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// How long a finished connection waits for the client to close first.
const LINGER: Duration = Duration::from_secs(2);

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
            pop_or(&queue, || {
                Response::error(500, "FakeOpenAi: no scripted response left")
            })
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

/// The front of `queue`, or `fallback()` once it is empty.
pub(crate) fn pop_or<T>(queue: &Mutex<VecDeque<T>>, fallback: impl FnOnce() -> T) -> T {
    queue
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .pop_front()
        .unwrap_or_else(fallback)
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
            Chunk::Wait(gate) => {
                tokio::select! {
                    _ = gate.opened() => {}
                    _ = closed.cancelled() => return Outcome::ClientGone,
                    _ = shutdown.cancelled() => return Outcome::Stopped,
                }
            }
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
