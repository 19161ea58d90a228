//! A small MCP server for tests, built with rmcp: over stdio (the `mcp-fixture` binary, see
//! [`fixture_command`]), over streamable HTTP on 127.0.0.1 ([`HttpFixture::start`]), and over
//! the older HTTP+SSE transport ([`SseFixture::start`]).
//!
//! Its tools:
//! - `echo {text}` answers `text` as it came;
//! - `fail {message?}` answers an `isError` result with the message;
//! - `slow {ms}` waits `ms` milliseconds (or until the client cancels the call, which it
//!   counts, see [`Fixture::cancelled`], and marks with a `cancelled-N` file in the marker
//!   directory when there is one) and answers `slept`;
//! - `media {}` answers a text, a PNG image, a text resource and a binary resource;
//! - `weird.name {}` answers `weird` (its name has a character tool ids may not have);
//! - `add_tool {}` adds the tool `extra` (answers `extra`) and tells the client its tool list
//!   changed;
//! - `exit {}` ends the process at once (stdio only: the server dies mid-call).
//!
//! The stdio binary writes its process id to `pid` in the marker directory (the environment
//! variable [`MARKERS_ENV`]) when it starts, so that a test can check the process is gone.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

/// The environment variable naming the directory where the stdio fixture leaves its marks.
pub const MARKERS_ENV: &str = "MCP_FIXTURE_MARKERS";

/// A one-pixel PNG, the image `media` answers.
pub const PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// The fixture server's state, shared by its connections.
#[derive(Debug, Default)]
pub struct FixtureState {
    cancelled: AtomicUsize,
    extra: AtomicBool,
    markers: Option<PathBuf>,
}

/// The fixture server (one per connection; they share a [`FixtureState`]).
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    state: Arc<FixtureState>,
}

impl Fixture {
    /// A fixture that leaves its marks in `markers`, when given.
    pub fn new(markers: Option<PathBuf>) -> Fixture {
        Fixture {
            state: Arc::new(FixtureState {
                markers,
                ..FixtureState::default()
            }),
        }
    }

    /// How many `slow` calls the client cancelled.
    pub fn cancelled(&self) -> usize {
        self.state.cancelled.load(Ordering::SeqCst)
    }

    /// The tools offered now.
    fn tools(&self) -> Vec<Tool> {
        let object = |properties: Value, required: &[&str]| -> Arc<Map<String, Value>> {
            let schema = json!({"type": "object", "properties": properties, "required": required});
            Arc::new(schema.as_object().cloned().unwrap_or_default())
        };
        let mut tools = vec![
            Tool::new(
                "echo",
                "Answers the text it is given.",
                object(
                    json!({"text": {"type": "string", "description": "What to answer"}}),
                    &["text"],
                ),
            ),
            Tool::new(
                "fail",
                "Always fails.",
                object(json!({"message": {"type": "string"}}), &[]),
            ),
            Tool::new(
                "slow",
                "Waits, then answers.",
                object(json!({"ms": {"type": "integer"}}), &["ms"]),
            ),
            Tool::new(
                "media",
                "Answers an image and resources.",
                object(json!({}), &[]),
            ),
            Tool::new("weird.name", "A name with a dot.", object(json!({}), &[])),
            Tool::new("add_tool", "Adds the tool `extra`.", object(json!({}), &[])),
            Tool::new("exit", "Ends the server.", object(json!({}), &[])),
        ];
        if self.state.extra.load(Ordering::SeqCst) {
            tools.push(Tool::new("extra", "Added later.", object(json!({}), &[])));
        }
        tools
    }

    /// Runs call `name` with `args`.
    async fn run(
        &self,
        name: &str,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        match name {
            "echo" => Ok(text(args.get("text").and_then(Value::as_str).unwrap_or(""))),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                args.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the fixture failed on purpose"),
            )])),
            "slow" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text("slept")),
                    () = ctx.ct.cancelled() => {
                        let n = self.state.cancelled.fetch_add(1, Ordering::SeqCst) + 1;
                        if let Some(dir) = &self.state.markers {
                            let _ = std::fs::write(dir.join(format!("cancelled-{n}")), "");
                        }
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "media" => {
                use base64::Engine;
                let png = base64::engine::general_purpose::STANDARD.encode(PIXEL_PNG);
                Ok(CallToolResult::success(vec![
                    ContentBlock::text("a picture"),
                    ContentBlock::image(png.clone(), "image/png"),
                    ContentBlock::resource(ResourceContents::text(
                        "resource text",
                        "file:///notes.txt",
                    )),
                    ContentBlock::resource(
                        ResourceContents::blob(png, "file:///pixel.png")
                            .with_mime_type("image/png"),
                    ),
                ]))
            }
            "weird.name" => Ok(text("weird")),
            "extra" if self.state.extra.load(Ordering::SeqCst) => Ok(text("extra")),
            "add_tool" => {
                self.state.extra.store(true, Ordering::SeqCst);
                let _ = ctx.peer.notify_tool_list_changed().await;
                Ok(text("added"))
            }
            "exit" => std::process::exit(3),
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        self.run(&request.name, &args, &context)
            .await
            .map(CallToolResponse::from)
    }
}

/// Serves the fixture on stdin and stdout until the client goes away (the binary's body).
pub async fn serve_stdio() -> std::io::Result<()> {
    let markers = std::env::var_os(MARKERS_ENV).map(PathBuf::from);
    if let Some(dir) = &markers {
        std::fs::write(dir.join("pid"), std::process::id().to_string())?;
    }
    let running = Fixture::new(markers)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    let _ = running.waiting().await;
    Ok(())
}

/// The path of the `mcp-fixture` binary, built once per test process (cargo answers at once
/// when it is up to date).
pub fn fixture_binary() -> std::io::Result<PathBuf> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let mut build = escargot::CargoBuild::new()
                .package("taskforce-testkit")
                .bin("mcp-fixture")
                .manifest_path(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
            // What cargo sets for the running test is not the build's business: some build
            // scripts track such variables, and the outer build would then see them change.
            for (key, _) in std::env::vars_os() {
                let key = key.to_string_lossy();
                let set_by_cargo = [
                    "CARGO_MANIFEST_",
                    "CARGO_PKG_",
                    "CARGO_BIN_",
                    "CARGO_CRATE_",
                ]
                .iter()
                .any(|p| key.starts_with(p))
                    || matches!(
                        &*key,
                        "CARGO_PRIMARY_PACKAGE"
                            | "CARGO_TARGET_TMPDIR"
                            | "CARGO_RUSTC_CURRENT_DIR"
                            | "OUT_DIR"
                    );
                if set_by_cargo {
                    build = build.env_remove(&*key);
                }
            }
            build
                .run()
                .map(|built| built.path().to_path_buf())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(std::io::Error::other)
}

/// The `command` of a local MCP server running the fixture binary (see [`fixture_binary`]).
pub fn fixture_command() -> std::io::Result<Vec<String>> {
    Ok(vec![fixture_binary()?.display().to_string()])
}

/// The fixture served over streamable HTTP on a random port of 127.0.0.1, until stopped or
/// dropped.
pub struct HttpFixture {
    /// The fixture behind the endpoint (shared by every session).
    pub fixture: Fixture,
    url: String,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HttpFixture {
    /// Binds 127.0.0.1:0 and serves the fixture at `/mcp`.
    pub async fn start() -> std::io::Result<HttpFixture> {
        use rmcp::transport::streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
        };
        let fixture = Fixture::new(None);
        let stop = tokio_util::sync::CancellationToken::new();
        let config =
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
        let shared = fixture.clone();
        let service = StreamableHttpService::new(
            move || Ok(shared.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await;
        });
        Ok(HttpFixture {
            fixture,
            url,
            stop,
            task,
        })
    }

    /// The endpoint's URL (`http://127.0.0.1:PORT/mcp`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops serving: open connections are cut, new ones refused.
    pub fn stop(&self) {
        self.stop.cancel();
        self.task.abort();
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The fixture over the older HTTP+SSE transport on a random port of 127.0.0.1: `GET /sse`
/// opens a session's event stream (its first event names `/message?session=N`), and messages
/// posted there reach the session's server. Stops when dropped.
pub struct SseFixture {
    /// The fixture behind the endpoint (shared by every session).
    pub fixture: Fixture,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

/// The sessions of an [`SseFixture`]: where each one's posted messages go.
#[derive(Clone)]
struct SseSessions {
    fixture: Fixture,
    next: Arc<AtomicUsize>,
    inboxes: Arc<std::sync::Mutex<std::collections::HashMap<usize, SseInbox>>>,
}

type SseInbox = futures::channel::mpsc::Sender<rmcp::model::ClientJsonRpcMessage>;

impl SseFixture {
    /// Binds 127.0.0.1:0 and serves the fixture at `/sse` and `/message`.
    pub async fn start() -> std::io::Result<SseFixture> {
        use axum::routing::{get, post};
        let fixture = Fixture::new(None);
        let sessions = SseSessions {
            fixture: fixture.clone(),
            next: Arc::default(),
            inboxes: Arc::default(),
        };
        let router = axum::Router::new()
            .route("/sse", get(sse_stream))
            .route("/message", post(sse_message))
            .with_state(sessions);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/sse", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(SseFixture { fixture, url, task })
    }

    /// The event stream's URL (`http://127.0.0.1:PORT/sse`).
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for SseFixture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `GET /sse`: a new session, its server started, its messages streamed.
async fn sse_stream(
    axum::extract::State(sessions): axum::extract::State<SseSessions>,
) -> axum::response::sse::Sse<
    impl futures::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
> {
    use axum::response::sse::Event;
    use futures::StreamExt;
    let id = sessions.next.fetch_add(1, Ordering::SeqCst);
    let (inbox, requests) = futures::channel::mpsc::channel(16);
    let (replies, outbox) = futures::channel::mpsc::channel(16);
    if let Ok(mut inboxes) = sessions.inboxes.lock() {
        inboxes.insert(id, inbox);
    }
    let fixture = sessions.fixture.clone();
    tokio::spawn(async move {
        if let Ok(running) = fixture.serve((replies, requests)).await {
            let _ = running.waiting().await;
        }
    });
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/message?session={id}"));
    let messages = outbox.map(|message: rmcp::model::ServerJsonRpcMessage| {
        let data = serde_json::to_string(&message).unwrap_or_default();
        Ok(Event::default().event("message").data(data))
    });
    axum::response::sse::Sse::new(futures::stream::once(async { Ok(endpoint) }).chain(messages))
}

/// `POST /message?session=N`: hands a client message to session N's server.
async fn sse_message(
    axum::extract::State(sessions): axum::extract::State<SseSessions>,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    use axum::http::StatusCode;
    use futures::SinkExt;
    let Some(id) = query.get("session").and_then(|s| s.parse::<usize>().ok()) else {
        return StatusCode::BAD_REQUEST;
    };
    let Ok(message) = serde_json::from_slice(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let inbox = sessions
        .inboxes
        .lock()
        .ok()
        .and_then(|inboxes| inboxes.get(&id).cloned());
    let Some(mut inbox) = inbox else {
        return StatusCode::NOT_FOUND;
    };
    match inbox.send(message).await {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => StatusCode::GONE,
    }
}
