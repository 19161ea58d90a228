//! `taskforce serve`: the runtime behind OpenCode's HTTP/SSE API until SIGINT (Ctrl-C) or
//! SIGTERM, which stop it cleanly: the server stops taking connections, the runtime cancels
//! its runs, commits their end and releases its lock, within 5 s.

use std::io::Write;
use std::time::Duration;

use clap::Args;

use super::UsageError;
use super::context::Context;
use super::output::outln;
use super::signals::{STOP_GRACE, StopSignals};
use taskforce_server::{Server, ServerOptions};

/// `taskforce serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub hostname: String,
    /// The port (0: any free port).
    #[arg(long, default_value_t = 4096)]
    pub port: u16,
    /// Join the cluster of the config's `[cluster]` (NATS JetStream) as a node; also when
    /// `[cluster] enabled = true`.
    #[arg(long)]
    pub cluster: bool,
}

/// How long open connections (SSE streams) get to close once the runtime has stopped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Runs `taskforce serve`.
pub fn run(context: &Context, args: ServeArgs) -> anyhow::Result<()> {
    let server = &context.loaded.config.server;
    let options = ServerOptions {
        hostname: args.hostname,
        port: args.port,
        password: std::env::var("TASKFORCE_SERVER_PASSWORD").ok(),
        allowed_hosts: server.allowed_hosts.clone(),
        max_connections_per_ip: server.max_connections_per_ip,
        replay_bytes: usize::try_from(context.loaded.config.server.replay_bytes)
            .unwrap_or(usize::MAX),
        ..ServerOptions::default()
    };
    let cluster = &context.loaded.config.cluster;
    let join = args.cluster || cluster.enabled;
    if join {
        cluster
            .nats_url()
            .map_err(|e| UsageError::new(anyhow::anyhow!("{e}")))?;
    }
    context.with_node_runtime(join, move |runtime| async move {
        let mut signals = StopSignals::new()?;
        let server = Server::bind(runtime.clone(), &options).await.map_err(|e| {
            UsageError::new(anyhow::anyhow!(
                "cannot listen on {}:{}: {e}",
                options.hostname,
                options.port
            ))
        })?;
        let addr = server.local_addr()?;
        outln!("taskforce server listening on http://{addr}")?;
        std::io::stdout().flush()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = server.run_until(async move {
            let _ = stopped.await;
        });
        tokio::pin!(serving);
        let signal = tokio::select! {
            served = &mut serving => return Ok(served?),
            signal = signals.recv() => signal,
        };
        eprintln!("{}: stopping the server…", signal.name());
        let _ = stop.send(());
        // The runs end while the server closes; connections still open a moment after the
        // runtime has stopped are left to the process's end.
        let (ended, mut has_ended) = tokio::sync::watch::channel(false);
        let stopping = async {
            runtime.stop(STOP_GRACE).await;
            let _ = ended.send(true);
        };
        let closing = async {
            tokio::select! {
                served = &mut serving => Some(served),
                () = async {
                    let _ = has_ended.wait_for(|ended| *ended).await;
                    tokio::time::sleep(CLOSE_GRACE).await;
                } => None,
            }
        };
        let ((), served) = tokio::join!(stopping, closing);
        match served {
            Some(served) => served?,
            None => tracing::debug!("connections still open at the stop were dropped"),
        }
        Ok(())
    })
}
