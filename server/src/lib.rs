//! taskforce-server: OpenCode's HTTP/SSE API over a runtime (what `taskforce serve` runs), so
//! OpenCode's SDK and clients can drive taskforce. Our additions (`/session/:id/tree`, SSE ids
//! and replay) sit beside it.
//!
//! [`Server::bind`] takes a started [`Runtime`] and [`ServerOptions`]; [`router`] gives the
//! same API as an axum router to mount in a service of one's own.

mod auth;
mod cluster;
pub mod epoch;
mod error;
mod events;
mod extract;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod guard;
mod listen;
pub mod openapi;
mod readers;
mod ring;
mod routes;
mod sse;

/// The user name basic auth expects when the server has a password.
pub use auth::USER as AUTH_USER;
pub use error::ApiError;
pub use events::EventLog;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use taskforce_actors::Runtime;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address to bind (127.0.0.1 unless told otherwise).
    pub hostname: String,
    /// The port (0: any free port).
    pub port: u16,
    /// Basic-auth password for user `taskforce` (from `TASKFORCE_SERVER_PASSWORD`); none: open.
    pub password: Option<String>,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// How often SSE streams send `server.heartbeat`.
    pub heartbeat: Duration,
    /// The most bytes of events kept for clients that reconnect with `Last-Event-ID` (the
    /// `[server] replay_bytes` setting).
    pub replay_bytes: usize,
    /// Names accepted in `Host` besides the bound address, `localhost`, `127.0.0.1` and `[::1]`.
    pub allowed_hosts: Vec<String>,
    /// The most open connections from one client address; more are answered 503 (0: no cap).
    pub max_connections_per_ip: u32,
    /// How long a client may take to send a request's headers, and to start its next request
    /// on a kept-alive connection, before the connection is closed.
    pub header_timeout: Duration,
    /// How long in-flight requests may run on once the server is told to stop.
    pub shutdown_grace: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            hostname: "127.0.0.1".into(),
            port: 4096,
            password: None,
            body_limit: 16 * 1024 * 1024,
            heartbeat: Duration::from_secs(30),
            replay_bytes: 8 * 1024 * 1024,
            allowed_hosts: Vec::new(),
            max_connections_per_ip: 256,
            header_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

/// What every handler gets.
#[derive(Clone)]
pub(crate) struct AppState {
    pub runtime: Runtime,
    pub events: EventLog,
    pub directory: PathBuf,
    pub heartbeat: Duration,
    /// Cancelled when the server stops: event streams end.
    pub stop: CancellationToken,
}

/// The API of `runtime` as an axum router (host, origin and content-type checks, auth, CORS
/// and the body limit included).
pub fn router(runtime: Runtime, options: &ServerOptions) -> Router {
    build(runtime, options, CancellationToken::new())
}

fn build(runtime: Runtime, options: &ServerOptions, stop: CancellationToken) -> Router {
    let directory = runtime.paths().project_root.clone();
    let epoch = epoch::for_data_dir(&runtime.paths().data_dir);
    let events = EventLog::start(
        &runtime,
        directory.display().to_string(),
        options.replay_bytes,
        epoch,
    );
    let state = AppState {
        runtime,
        events,
        directory,
        heartbeat: options.heartbeat,
        stop,
    };
    routes::all()
        .method_not_allowed_fallback(error::method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(options.body_limit))
        .layer(auth::cors())
        .layer(axum::middleware::from_fn_with_state(
            auth::Password::new(options.password.clone()),
            auth::basic,
        ))
        .layer(axum::middleware::from_fn_with_state(
            guard::Hosts::new(&options.hostname, &options.allowed_hosts),
            guard::check,
        ))
}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    router: Router,
    limits: listen::Limits,
    stop: CancellationToken,
}

impl Server {
    /// Binds the address; fails when it is taken or invalid.
    pub async fn bind(runtime: Runtime, options: &ServerOptions) -> std::io::Result<Server> {
        let listener = TcpListener::bind((options.hostname.as_str(), options.port)).await?;
        if let Some(cluster) = runtime.cluster() {
            cluster.set_address(format!("http://{}", listener.local_addr()?));
        }
        let stop = CancellationToken::new();
        Ok(Server {
            listener,
            router: build(runtime, options, stop.clone()),
            limits: listen::Limits {
                header_timeout: options.header_timeout,
                per_ip: options.max_connections_per_ip,
                grace: options.shutdown_grace,
            },
            stop,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; then stops accepting, ends event streams at once and
    /// lets other in-flight requests finish within `shutdown_grace`.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        listen::serve(self.listener, self.router, self.limits, self.stop, shutdown).await;
        Ok(())
    }
}
