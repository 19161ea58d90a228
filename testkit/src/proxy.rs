//! A TCP proxy that a test cuts and restores, so that what connects through it (a node's NATS
//! client, a PostgreSQL store) loses its connection for a while as on a network failure.

/// A TCP proxy in front of a server (NATS, or PostgreSQL) that a test can cut and restore.
#[derive(Debug)]
pub struct CutProxy {
    /// `nats://127.0.0.1:<port>`: where nodes behind the proxy connect (a client of another
    /// server takes the port from it).
    pub url: String,
    state: std::sync::Arc<ProxyState>,
}

#[derive(Debug)]
struct ProxyState {
    /// The connections of this generation close when it is cancelled (a cut).
    live: std::sync::Mutex<tokio_util::sync::CancellationToken>,
    /// New connections are closed at once while cut.
    cut: std::sync::atomic::AtomicBool,
}

impl CutProxy {
    /// A proxy to the server at `upstream` (`nats://host:port`, or `host:port`), on a free local
    /// port.
    pub async fn start(upstream: &str) -> CutProxy {
        let target = upstream
            .trim_start_matches("nats://")
            .trim_end_matches('/')
            .to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("binding the proxy: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the proxy's address: {e}"))
            .port();
        let state = std::sync::Arc::new(ProxyState {
            live: std::sync::Mutex::new(tokio_util::sync::CancellationToken::new()),
            cut: std::sync::atomic::AtomicBool::new(false),
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if accepting.cut.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let token = accepting
                    .live
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        () = token.cancelled() => {}
                    }
                });
            }
        });
        CutProxy {
            url: format!("nats://127.0.0.1:{port}"),
            state,
        }
    }

    /// Closes every connection through the proxy and refuses new ones until [`Self::restore`].
    pub fn cut(&self) {
        self.state
            .cut
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut live = self
            .state
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        live.cancel();
        *live = tokio_util::sync::CancellationToken::new();
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.state
            .cut
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
