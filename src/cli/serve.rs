//! `taskforce serve`: the runtime behind OpenCode's HTTP/SSE API until Ctrl-C.

use std::io::Write;

use clap::Args;

use super::UsageError;
use super::context::Context;
use crate::server::{Server, ServerOptions};

/// `taskforce serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub hostname: String,
    /// The port (0: any free port).
    #[arg(long, default_value_t = 4096)]
    pub port: u16,
}

/// Runs `taskforce serve`.
pub fn run(context: &Context, args: ServeArgs) -> anyhow::Result<()> {
    let options = ServerOptions {
        hostname: args.hostname,
        port: args.port,
        password: std::env::var("TASKFORCE_SERVER_PASSWORD").ok(),
        replay_bytes: usize::try_from(context.loaded.config.server.replay_bytes)
            .unwrap_or(usize::MAX),
        ..ServerOptions::default()
    };
    context.with_runtime(move |runtime| async move {
        let server = Server::bind(runtime.clone(), &options).await.map_err(|e| {
            UsageError::new(anyhow::anyhow!(
                "cannot listen on {}:{}: {e}",
                options.hostname,
                options.port
            ))
        })?;
        let addr = server.local_addr()?;
        println!("taskforce server listening on http://{addr}");
        std::io::stdout().flush()?;
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        server.run_until(shutdown).await?;
        Ok(())
    })
}
