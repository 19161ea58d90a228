//! `taskforce serve` over real HTTP: a runtime on SQLite in a temp directory, its model traffic
//! going to a fake OpenAI-compatible server, the API bound on 127.0.0.1 port 0.

mod cluster;
mod connections;
mod errors;
mod event_stream;
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
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use taskforce_actors::{Runtime, RuntimeOptions};
use taskforce_server::{Server, ServerOptions};
use taskforce_testkit::Sandbox;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

pub use event_stream::{EventId, Frame, Sse};

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
