//! The accept loop: each connection is served by hyper (HTTP/1.1, keep-alive) with a deadline
//! for request headers, at most `max_connections_per_ip` open connections per client address
//! (the next gets a bare 503 and is closed), accept failures such as running out of file
//! descriptors logged and waited out, and a stop that ends event streams and lets other
//! requests finish within a grace period.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The first wait after an accept failure; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(10);
/// The longest wait after repeated accept failures.
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a refused connection may take to read the request and get its 503.
const REFUSE_TIME: Duration = Duration::from_secs(1);

/// What bounds connections.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// How long a client may take to send a request's headers (also the idle keep-alive time).
    pub header_timeout: Duration,
    /// The most open connections from one address (0: no cap).
    pub per_ip: u32,
    /// How long in-flight requests may run on after the stop before they are cut.
    pub grace: Duration,
}

/// Where connections come from: a TCP listener, or a scripted source in tests.
pub(crate) trait Accept: Send {
    /// One connection.
    type Conn: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection and its peer address.
    fn accept(&mut self) -> impl Future<Output = io::Result<(Self::Conn, SocketAddr)>> + Send;
}

impl Accept for TcpListener {
    type Conn = TcpStream;

    async fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = TcpListener::accept(self).await?;
        // Event frames are small writes that must leave at once.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        Ok((stream, peer))
    }
}

/// What an accept failure calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AcceptFailure {
    /// One connection failed before it was accepted: take the next at once.
    Connection,
    /// The server cannot accept now (out of file descriptors or memory): wait, then retry.
    Server,
}

fn classify(error: &io::Error) -> AcceptFailure {
    use io::ErrorKind::*;
    match error.kind() {
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
        | TimedOut => AcceptFailure::Connection,
        _ => AcceptFailure::Server,
    }
}

/// Serves `router` on what `listener` accepts until `shutdown` resolves; then cancels `stop`
/// (event streams end), stops accepting, and waits up to `limits.grace` for open requests.
pub(crate) async fn serve<A: Accept>(
    mut listener: A,
    router: Router,
    limits: Limits,
    stop: CancellationToken,
    shutdown: impl Future<Output = ()> + Send,
) {
    let counts = Counts::default();
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    let mut backoff = BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((conn, peer)) => {
                backoff = BACKOFF_MIN;
                match counts.enter(peer.ip(), limits.per_ip) {
                    Some(slot) => connections.spawn(connection(
                        conn,
                        router.clone(),
                        limits.header_timeout,
                        slot,
                        stop.clone(),
                    )),
                    None => connections.spawn(refuse(conn, limits.per_ip)),
                };
            }
            Err(e) => match classify(&e) {
                AcceptFailure::Connection => tracing::debug!("a connection failed: {e}"),
                AcceptFailure::Server => {
                    tracing::warn!(
                        "cannot accept connections: {e}; retrying in {} ms",
                        backoff.as_millis()
                    );
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            },
        }
    }
    drop(listener);
    stop.cancel();
    let drained = tokio::time::timeout(limits.grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections were still busy {} ms after the stop; they are cut",
            connections.len(),
            limits.grace.as_millis()
        );
    }
}

/// Serves one connection until it closes, or until `stop` and its current request is done.
async fn connection<C: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    conn: C,
    router: Router,
    header_timeout: Duration,
    _slot: Slot,
    stop: CancellationToken,
) {
    let service = TowerToHyperService::new(router);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let mut served = pin!(builder.serve_connection(TokioIo::new(conn), service));
    let result = tokio::select! {
        result = served.as_mut() => result,
        () = stop.cancelled() => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection ended: {e}");
    }
}

/// Answers a connection over the per-address cap with 503 and closes it.
async fn refuse<C: AsyncRead + AsyncWrite + Unpin>(mut conn: C, cap: u32) {
    let body = serde_json::json!({
        "name": "ServiceUnavailable",
        "data": {"message": format!(
            "too many open connections from this address (at most {cap}); close some and retry"
        )},
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let answered = tokio::time::timeout(REFUSE_TIME, async {
        conn.write_all(response.as_bytes()).await?;
        conn.shutdown().await?;
        // Read what the client sent, so that closing does not reset the connection before
        // the client has read the answer.
        let mut buffer = [0u8; 4096];
        let mut total = 0;
        while total < 64 * 1024 {
            match conn.read(&mut buffer).await? {
                0 => break,
                n => total += n,
            }
        }
        io::Result::Ok(())
    })
    .await;
    if let Ok(Err(e)) = answered {
        tracing::debug!("answering a refused connection failed: {e}");
    }
}

/// Open connections by client address.
#[derive(Clone, Default)]
struct Counts(Arc<Mutex<HashMap<IpAddr, u32>>>);

impl Counts {
    /// A slot for one more connection from `ip`, unless it has `cap` already.
    fn enter(&self, ip: IpAddr, cap: u32) -> Option<Slot> {
        let ip = ip.to_canonical();
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let open = counts.entry(ip).or_insert(0);
        if cap != 0 && *open >= cap {
            return None;
        }
        *open += 1;
        Some(Slot {
            counts: self.clone(),
            ip,
        })
    }
}

/// One open connection, counted until dropped.
struct Slot {
    counts: Counts,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = counts.get_mut(&self.ip) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use axum::routing::get;
    use tokio::io::DuplexStream;

    use super::*;

    #[test]
    fn out_of_descriptors_waits_but_a_failed_connection_does_not() {
        for (errno, name) in [(24, "EMFILE"), (23, "ENFILE"), (12, "ENOMEM")] {
            let error = io::Error::from_raw_os_error(errno);
            assert_eq!(classify(&error), AcceptFailure::Server, "{name}");
        }
        for kind in [
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::Interrupted,
        ] {
            assert_eq!(
                classify(&io::Error::from(kind)),
                AcceptFailure::Connection,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn the_cap_counts_open_connections_per_address() {
        let counts = Counts::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = counts.enter(a, 2).unwrap();
        let _second = counts.enter(mapped, 2).unwrap();
        assert!(
            counts.enter(a, 2).is_none(),
            "the same address, IPv4-mapped"
        );
        let _other = counts.enter(b, 2).unwrap();
        drop(first);
        assert!(
            counts.enter(a, 2).is_some(),
            "a closed connection frees its slot"
        );
        assert!(counts.enter(a, 0).is_some(), "0 is no cap");
    }

    /// Accept failures from a script, then in-memory connections.
    struct Scripted {
        script: VecDeque<io::Result<DuplexStream>>,
    }

    impl Accept for Scripted {
        type Conn = DuplexStream;

        async fn accept(&mut self) -> io::Result<(DuplexStream, SocketAddr)> {
            match self.script.pop_front() {
                Some(next) => next.map(|c| (c, SocketAddr::from(([127, 0, 0, 1], 1)))),
                None => std::future::pending().await,
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_keeps_accepting_after_running_out_of_descriptors() {
        let (client, server) = tokio::io::duplex(4096);
        let mut script: VecDeque<io::Result<DuplexStream>> = (0..5)
            .map(|_| Err(io::Error::from_raw_os_error(24)))
            .collect();
        script.push_back(Ok(server));
        let router = Router::new().route("/", get(|| async { "still here" }));
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            per_ip: 4,
            grace: Duration::from_secs(1),
        };
        let started = tokio::time::Instant::now();
        let stop = CancellationToken::new();
        tokio::spawn(serve(
            Scripted { script },
            router,
            limits,
            stop,
            std::future::pending(),
        ));
        let mut client = client;
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("still here"), "{answer}");
        // Five failures waited 10 + 20 + 40 + 80 + 160 ms: backed off, no busy loop.
        assert!(
            started.elapsed() >= Duration::from_millis(310),
            "{:?}",
            started.elapsed()
        );
    }
}
