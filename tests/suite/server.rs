//! `taskforce serve` over real HTTP: a runtime on SQLite in a temp directory, its model traffic
//! going to a fake OpenAI-compatible server, the API bound on 127.0.0.1 port 0.

mod cluster;
mod connections;
mod errors;
mod guard;
mod mcp;
mod messages;
mod opencode;
mod permissions;
mod questions;
mod secrets;
mod sessions;
mod skills;
mod sse;
mod streaming;
mod tui_control;
mod undo;

use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use taskforce_actors::{Runtime, RuntimeOptions};
use taskforce_server::{Server, ServerOptions};
use taskforce_testkit::Sandbox;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

/// How long any single wait of these tests may take before it fails.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// What to start: extra configuration, project files and server options.
pub struct Builder {
    config: String,
    files: Vec<(String, String)>,
    options: ServerOptions,
    /// The `[cluster]` section to join with, when the runtime is a cluster node.
    cluster: Option<String>,
}

/// A harness with no extra configuration and default server options (on port 0).
pub fn harness() -> Builder {
    Builder {
        config: String::new(),
        files: Vec::new(),
        options: ServerOptions {
            port: 0,
            ..ServerOptions::default()
        },
        cluster: None,
    }
}

impl Builder {
    /// TOML placed after `model = …` and before `[provider.fake]` (top-level keys, then tables).
    pub fn config(mut self, toml: &str) -> Self {
        self.config.push_str(toml);
        self
    }

    /// Makes the runtime a node of a cluster: `section` is its `[cluster]` TOML.
    pub fn node(mut self, section: String) -> Self {
        self.cluster = Some(section);
        self
    }

    /// A file below the project.
    pub fn file(mut self, rel: &str, text: &str) -> Self {
        self.files.push((rel.into(), text.into()));
        self
    }

    /// Changes the server options (the port stays 0).
    pub fn options(mut self, change: impl FnOnce(&mut ServerOptions)) -> Self {
        change(&mut self.options);
        self.options.port = 0;
        self
    }

    /// Starts the fake model answering with `model`, the runtime and the server.
    pub async fn start(
        self,
        model: impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static,
    ) -> Harness {
        let fake = FakeOpenAi::start(model).await.unwrap();
        let sandbox = Sandbox::new();
        sandbox.file("notes.txt", "hello from the project\n");
        sandbox.config(&format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n{}\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-test-secret\"\n{}",
            self.config,
            fake.base_url(),
            self.cluster.as_deref().unwrap_or_default()
        ));
        for (rel, text) in &self.files {
            sandbox.file(rel, text);
        }
        let cluster = self.cluster.is_some();
        let served = serve(&sandbox, &self.options, cluster).await;
        Harness {
            cluster,
            stop: Some(served.stop),
            served: Some(served.served),
            addr: served.addr,
            project: sandbox.project.clone(),
            sandbox,
            options: self.options,
            fake,
            runtime: served.runtime,
            base: served.base,
            client: reqwest::Client::new(),
            auth: None,
        }
    }
}

/// Starts a runtime on `sandbox`'s data directory for its project and a server over it;
/// answers the runtime and the server's base URL.
async fn serve(sandbox: &Sandbox, server: &ServerOptions, cluster: bool) -> Served {
    let mut env = sandbox.hermetic_env();
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_default(),
    );
    let mut options = RuntimeOptions::new(sandbox.load(&env));
    options.env = env;
    options.arbiters = 2;
    options.retry_base = Duration::from_millis(10);
    options.cluster = cluster;
    let runtime = tokio::task::spawn_blocking(move || Runtime::spawn_dedicated(options))
        .await
        .unwrap()
        .unwrap();
    let server = Server::bind(runtime.clone(), server).await.unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    Served {
        runtime,
        base: format!("http://{addr}"),
        addr,
        stop,
        served,
    }
}

/// A server running on a runtime of its own.
struct Served {
    runtime: Runtime,
    base: String,
    addr: std::net::SocketAddr,
    /// Resolves the server's `run_until` future when sent (or dropped).
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// A running server with its runtime and fake model.
pub struct Harness {
    /// The project, home and data directories.
    sandbox: Sandbox,
    /// The project directory.
    pub project: PathBuf,
    options: ServerOptions,
    /// Whether the runtime is a cluster node.
    cluster: bool,
    /// The fake model.
    pub fake: FakeOpenAi,
    /// The runtime behind the server.
    pub runtime: Runtime,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// A client without a timeout (prompts may wait).
    pub client: reqwest::Client,
    /// `(user, password)` sent with every request, when set.
    pub auth: Option<(String, String)>,
    /// The server's address.
    pub addr: std::net::SocketAddr,
    /// Resolves the server's `run_until` future when sent (or dropped).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The task running `run_until`.
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// A response: its status, headers and body (JSON when it parses, else a JSON string; `Null`
/// when empty).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The body, after checking the status is 200.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "body: {}", self.body);
        self.body
    }

    /// The error message, after checking the status and OpenCode's `{name, data: {message}}`.
    #[track_caller]
    pub fn error(self, status: u16, name: &str) -> String {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.body["name"], name, "body: {}", self.body);
        let object = self.body.as_object().expect("the error is an object");
        assert_eq!(object.len(), 2, "only name and data: {}", self.body);
        let data = self.body["data"].as_object().expect("data is an object");
        assert_eq!(data.len(), 1, "only data.message: {}", self.body);
        self.body["data"]["message"]
            .as_str()
            .expect("data.message is a string")
            .to_string()
    }
}

impl Harness {
    /// Tells the server to stop; answers how long `run_until` took to return.
    pub async fn stop_server(&mut self) -> Duration {
        let started = tokio::time::Instant::now();
        drop(self.stop.take());
        let served = self.served.take().expect("the server runs");
        tokio::time::timeout(PATIENCE, served)
            .await
            .expect("run_until returns")
            .unwrap()
            .unwrap();
        started.elapsed()
    }

    /// Stops the runtime as a process exit would and serves the same project and data
    /// directory again from a new runtime, on a new port (the old server answers no more).
    pub async fn restart(mut self) -> Harness {
        self.runtime.shutdown().await;
        drop(self.stop.take());
        let served = serve(&self.sandbox, &self.options, self.cluster).await;
        self.runtime = served.runtime;
        self.base = served.base;
        self.addr = served.addr;
        self.stop = Some(served.stop);
        self.served = Some(served.served);
        self
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `path`, with the harness's credentials.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.client.request(method, self.url(path));
        match &self.auth {
            Some((user, password)) => builder.basic_auth(user, Some(password)),
            None => builder,
        }
    }

    /// Sends `builder` and reads the whole answer.
    pub async fn send(&self, builder: reqwest::RequestBuilder) -> Answer {
        let response = builder.send().await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    /// `method path` with an optional JSON body.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let mut builder = self.request(method, path);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        self.send(builder).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Answer {
        self.call(Method::PATCH, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.call(Method::DELETE, path, None).await
    }

    /// `POST path` with `body` sent as is, as JSON.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Answer {
        let builder = self
            .request(Method::POST, path)
            .header("content-type", "application/json")
            .body(body);
        self.send(builder).await
    }

    /// A new session (`POST /session` with `body`); answers its info.
    pub async fn session(&self, body: Value) -> Value {
        self.post("/session", body).await.ok()
    }

    /// The id of a new root session.
    pub async fn session_id(&self) -> String {
        id_of(&self.session(serde_json::json!({})).await)
    }

    /// `POST /session/:id/message` with one text part; answers `{info, parts}`.
    pub async fn prompt(&self, session: &str, text: &str) -> Value {
        self.post(
            &format!("/session/{session}/message"),
            serde_json::json!({"parts": [{"type": "text", "text": text}]}),
        )
        .await
        .ok()
    }

    /// `GET /session/:id/message`.
    pub async fn messages(&self, session: &str) -> Vec<Value> {
        array(self.get(&format!("/session/{session}/message")).await.ok())
    }

    /// Waits until the fake model received `n` requests.
    pub async fn wait_for_requests(&self, n: usize) {
        assert!(
            self.fake.wait_for_requests(n, PATIENCE).await,
            "the model got {} requests, not {n}",
            self.fake.requests().len()
        );
    }

    /// Polls `GET path` until `done(body)` holds; answers that body.
    pub async fn poll(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        let last = std::sync::Mutex::new(Value::Null);
        let (last_ref, done) = (&last, &done);
        taskforce_testkit::eventually_async(
            &format!("GET {path} to satisfy the condition"),
            || async move {
                let body = self.get(path).await.ok();
                let ok = done(&body);
                *last_ref.lock().unwrap() = body;
                ok
            },
        )
        .await;
        last.into_inner().unwrap()
    }
}

/// `value["id"]` as a string.
#[track_caller]
pub fn id_of(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_string()
}

/// `value` as an array.
#[track_caller]
pub fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => panic!("expected an array: {other}"),
    }
}

/// The text of a `{info, parts}`'s text parts, joined.
pub fn text_of(message: &Value) -> String {
    message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// A model that answers every request with `text`.
pub fn answers(text: &'static str) -> impl Fn(&RecordedRequest) -> Response + Send + Sync {
    move |_| Response::text(text)
}

/// A model whose answer starts and then stalls until the client goes away.
pub fn stalls() -> Response {
    Response::text("thinking about it for a very long while").stall_after(2)
}

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
