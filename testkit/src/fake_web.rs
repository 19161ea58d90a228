//! A fake web on 127.0.0.1 for the web tools' tests: a small site (an HTML page, text, JSON,
//! redirect chains, a page that never answers, pages over 5 MB, binary data, an image, any
//! status), an Exa-compatible search endpoint (`POST /exa/mcp`, JSON-RPC answered as an event
//! stream, as Exa's MCP server answers) and a SearXNG instance (`GET /searxng/search`).
//!
//! Every request is recorded (method, path, query, headers, body) for assertions.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use taskforce_testkit::fake_web::FakeWeb;
//! let web = FakeWeb::start().await?;
//! let page = web.url("/page.html"); // http://127.0.0.1:<port>/page.html
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The HTML page at `/page.html`.
pub const PAGE_HTML: &str = r#"<!doctype html>
<html><head><title>Fixture page</title><style>body { color: red }</style>
<script>var tracking = "do not show";</script></head>
<body><h1>Welcome</h1><p>A page with <strong>bold</strong> text and a <a href="/notes.txt">link</a>.</p>
<ul><li>first</li><li>second</li></ul></body></html>"#;

/// The text at `/notes.txt`.
pub const NOTES: &str = "plain notes\nsecond line\n";

/// The body size of `/huge` and `/huge-declared`: over webfetch's 5 MB cap.
pub const HUGE_BYTES: usize = 6 * 1024 * 1024;

/// A 1×1 transparent PNG, served at `/image.png`.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// One request the fake web received.
#[derive(Debug, Clone, PartialEq)]
pub struct WebRequest {
    /// `GET`, `POST`…
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query parameters.
    pub query: HashMap<String, String>,
    /// The headers, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
}

impl WebRequest {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::fake_openai::header(&self.headers, name)
    }
}

type Log = Arc<Mutex<Vec<WebRequest>>>;

/// A running fake web; dropping it stops it.
#[derive(Debug)]
pub struct FakeWeb {
    addr: SocketAddr,
    log: Log,
    server: JoinHandle<()>,
}

impl Drop for FakeWeb {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeWeb {
    /// Starts the fake web on a free port of 127.0.0.1.
    pub async fn start() -> std::io::Result<FakeWeb> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let log: Log = Arc::default();
        let app = Router::new()
            .route("/page.html", get(|| async { html(PAGE_HTML) }))
            .route(
                "/notes.txt",
                get(|| async { typed("text/plain; charset=utf-8", NOTES) }),
            )
            .route(
                "/data.json",
                get(|| async { typed("application/json", r#"{"answer":42}"#) }),
            )
            .route("/redirect/{n}", get(redirect_chain))
            .route("/to", get(redirect_to))
            .route("/slow", get(std::future::pending::<Response>))
            .route("/huge", get(huge_streamed))
            .route("/huge-declared", get(huge_declared))
            .route("/binary", get(|| async { binary() }))
            .route("/image.png", get(|| async { typed("image/png", PNG) }))
            .route("/status/{code}", get(status))
            .route("/exa/mcp", post(exa))
            .route("/searxng/search", get(searxng))
            .layer(axum::middleware::from_fn_with_state(log.clone(), record));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeWeb { addr, log, server })
    }

    /// The address of `path` (`http://127.0.0.1:<port><path>`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The address the fake web listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<WebRequest> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The requests to `path`.
    pub fn requests_to(&self, path: &str) -> Vec<WebRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }
}

/// Records the request, then passes it on.
async fn record(
    State(log): State<Log>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(recorded(&parts.method, &parts.uri, &parts.headers, &bytes));
    next.run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn recorded(method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> WebRequest {
    let query = Query::<HashMap<String, String>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default();
    WebRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        query,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    }
}

fn typed(content_type: &'static str, body: impl Into<Body>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.into()).into_response()
}

fn html(body: &'static str) -> Response {
    typed("text/html; charset=utf-8", body)
}

fn binary() -> Response {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    typed("application/octet-stream", bytes)
}

/// `/redirect/<n>`: `n` more redirects, then the HTML page.
async fn redirect_chain(Path(n): Path<u32>) -> Redirect {
    if n <= 1 {
        Redirect::temporary("/page.html")
    } else {
        Redirect::temporary(&format!("/redirect/{}", n - 1))
    }
}

/// `/to?url=<target>`: one redirect to `target`.
async fn redirect_to(Query(q): Query<HashMap<String, String>>) -> Response {
    match q.get("url") {
        Some(target) => Redirect::to(target).into_response(),
        None => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn status(Path(code): Path<u16>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, format!("status {code}")).into_response()
}

/// Over 5 MB of text in chunks, with no `Content-Length`.
async fn huge_streamed() -> Response {
    let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
    let chunks = HUGE_BYTES / chunk.len();
    let stream = futures::stream::iter(
        (0..chunks).map(move |_| Ok::<_, std::convert::Infallible>(chunk.clone())),
    );
    typed("text/plain", Body::from_stream(stream))
}

/// Over 5 MB of text, announced in `Content-Length`.
async fn huge_declared() -> Response {
    typed("text/plain", vec![b'a'; HUGE_BYTES])
}

/// Exa's MCP endpoint: `tools/call` of `web_search_exa` or `get_code_context_exa`, answered
/// as one server-sent event. The key `bad-key` gets 401; the query `nothing` finds nothing;
/// the query `fail` gets a JSON-RPC error.
async fn exa(headers: HeaderMap, body: Bytes) -> Response {
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) == Some("bad-key") {
        return (StatusCode::UNAUTHORIZED, "invalid API key").into_response();
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = request["id"].clone();
    let name = request["params"]["name"].as_str().unwrap_or("");
    let args = &request["params"]["arguments"];
    let query = args["query"].as_str().unwrap_or("");
    let answer = if request["method"] != "tools/call" {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
    } else if query == "fail" {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "search backend failed"}})
    } else {
        let text = match (name, query) {
            (_, "nothing") => None,
            ("web_search_exa", q) => Some(format!(
                "Title: Result for {q}\nURL: https://example.com/{q}\nText: {} results, type {}, livecrawl {}",
                args["numResults"], args["type"], args["livecrawl"]
            )),
            ("get_code_context_exa", q) => Some(format!(
                "## Code for {q}\n```rust\nfn main() {{}}\n```\n({} tokens)",
                args["tokensNum"]
            )),
            _ => Some(format!("unknown tool {name}")),
        };
        let content: Vec<Value> = text
            .into_iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": content}})
    };
    typed(
        "text/event-stream",
        format!("event: message\ndata: {answer}\n\n"),
    )
}

/// SearXNG's search: JSON only when `format=json` (else 403, as an instance without the JSON
/// format answers); the query `nothing` finds nothing; the category `it` finds code pages.
async fn searxng(Query(q): Query<HashMap<String, String>>) -> Response {
    if q.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "Forbidden").into_response();
    }
    let query = q.get("q").cloned().unwrap_or_default();
    let code = q.get("categories").map(String::as_str) == Some("it");
    let results: Vec<Value> = if query == "nothing" {
        Vec::new()
    } else {
        (1..=12)
            .map(|i| {
                let site = if code { "code.example" } else { "web.example" };
                json!({
                    "title": format!("{query} result {i}"),
                    "url": format!("https://{site}/{i}"),
                    "content": format!("About {query}, number {i}."),
                    "engine": "fake",
                    "publishedDate": null,
                })
            })
            .collect()
    };
    let body = json!({"query": query, "number_of_results": results.len(), "results": results, "answers": []});
    typed("application/json", body.to_string())
}
