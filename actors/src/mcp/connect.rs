//! Opening a connection to one MCP server: a local server's process and its standard streams,
//! or a remote server over streamable HTTP (else the older HTTP+SSE); and what taskforce
//! answers the server as a client.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use taskforce_agents::config::{McpConfig, McpKind};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

/// How many of a local server's last stderr lines are kept, to explain why it failed.
const STDERR_LINES: usize = 8;

/// A connected server, as rmcp runs it.
pub(super) type Running = RunningService<RoleClient, Handler>;

/// taskforce as an MCP client: tells the connection when the server's tool list changed.
#[derive(Clone)]
pub(super) struct Handler {
    info: ClientConfig,
    changes: mpsc::UnboundedSender<()>,
}

impl Handler {
    /// A client that sends a unit on `changes` for each `tools/list_changed`.
    pub(super) fn new(changes: mpsc::UnboundedSender<()>) -> Handler {
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("taskforce", env!("CARGO_PKG_VERSION")),
        )
        // The handshake every deployed server speaks (later revisions drop `initialize`).
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        Handler { info, changes }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(());
    }
}

/// The last lines a local server wrote on stderr (each is also logged at debug level).
#[derive(Clone, Default)]
pub(super) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// The kept lines, joined; `None` when there are none.
    pub(super) fn text(&self) -> Option<String> {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (!lines.is_empty()).then(|| lines.iter().cloned().collect::<Vec<_>>().join(" | "))
    }

    /// Reads `stderr` to its end, keeping the last lines.
    fn follow(&self, server: String, stderr: tokio::process::ChildStderr) {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %server, "MCP server stderr: {line}");
                let mut kept = tail.0.lock().unwrap_or_else(PoisonError::into_inner);
                if kept.len() == STDERR_LINES {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
    }
}

/// Connects to server `name` as `config` says (a local one starts in `cwd`) and completes the
/// handshake; the error says what went wrong, for a person.
pub(super) async fn open(
    name: &str,
    config: &McpConfig,
    cwd: &Path,
    handler: Handler,
) -> Result<(Running, StderrTail), String> {
    let tail = StderrTail::default();
    let running = match config.kind {
        Some(McpKind::Local) => {
            let transport = spawn_local(name, config, cwd, &tail)?;
            handler
                .serve(transport)
                .await
                .map_err(|e| with_stderr(e.to_string(), &tail))?
        }
        Some(McpKind::Remote) => {
            let url = config.url.as_deref().unwrap_or_default();
            let transport = remote_transport(url, config)?;
            match handler.clone().serve(transport).await {
                Ok(running) => running,
                // A server older than streamable HTTP may speak HTTP+SSE.
                Err(streamable) => {
                    let halves = super::sse::open(url, &config.headers)
                        .await
                        .map_err(|sse| format!("streamable HTTP: {streamable}; HTTP+SSE: {sse}"))?;
                    handler
                        .serve(halves)
                        .await
                        .map_err(|sse| format!("streamable HTTP: {streamable}; HTTP+SSE: {sse}"))?
                }
            }
        }
        None => return Err("the server has no `type`".into()),
    };
    Ok((running, tail))
}

/// `message`, with what the server last wrote on stderr when it wrote anything.
pub(super) fn with_stderr(message: String, tail: &StderrTail) -> String {
    match tail.text() {
        Some(stderr) => format!("{message} (stderr: {stderr})"),
        None => message,
    }
}

/// Starts a local server's process in its own process group, killed if it is dropped.
fn spawn_local(
    name: &str,
    config: &McpConfig,
    cwd: &Path,
    tail: &StderrTail,
) -> Result<rmcp::transport::TokioChildProcess, String> {
    use process_wrap::tokio::{CommandWrap, KillOnDrop};
    let (program, args) = config
        .command
        .split_first()
        .ok_or_else(|| "the server has no `command`".to_string())?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(&config.environment)
        .current_dir(cwd);
    let mut wrapped = CommandWrap::from(command);
    // Its own group, so that stopping it stops what it started too.
    #[cfg(unix)]
    wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    if let Some(stderr) = stderr {
        tail.follow(name.to_string(), stderr);
    }
    Ok(transport)
}

/// The streamable HTTP transport to `url` with `config`'s headers.
fn remote_transport(
    url: &str,
    config: &McpConfig,
) -> Result<impl rmcp::transport::Transport<RoleClient> + 'static, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    install_crypto();
    let mut headers = std::collections::HashMap::new();
    for (key, value) in &config.headers {
        let name = http::HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| format!("header `{key}` is not a valid header name"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("header `{key}` has a value that cannot be sent"))?;
        headers.insert(name, value);
    }
    let transport_config =
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    Ok(rmcp::transport::StreamableHttpClientTransport::from_config(
        transport_config,
    ))
}

/// Makes ring rustls's process-wide crypto provider, once: rmcp's HTTP client brings rustls
/// without one.
fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}
