//! One connection to one server, from its start to its end: connect and list the tools within
//! the server's timeout, follow tool-list changes, and notice when the server goes away.

use std::sync::Arc;
use std::time::Duration;

use taskforce_agents::config::McpConfig;
use taskforce_agents::tool::Tool;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::connect::{self, Handler, Running, StderrTail};
use super::tool::McpTool;
use super::{Mcp, McpStatus};

/// How long a closing connection may take before it is left to end (and a local server's
/// process to be killed) on its own.
pub(super) const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// One connection attempt and, when it succeeds, the connection's life.
pub(super) struct Attempt {
    pub mcp: Mcp,
    pub name: String,
    pub config: McpConfig,
    /// The server's generation this connection belongs to.
    pub generation: u64,
    /// Ends the connection (a disconnect, or the runtime stopping).
    pub stop: CancellationToken,
    /// Told once the attempt is over (connected or failed).
    pub done: Option<oneshot::Sender<()>>,
}

impl Attempt {
    /// Connects, then serves until the server goes away or the connection is stopped.
    pub async fn run(mut self) {
        let (changes_tx, mut changes) = mpsc::unbounded_channel();
        let limit = Duration::from_millis(self.config.connect_timeout_ms());
        let cwd = self.mcp.inner.cwd.clone();
        let opening = async {
            let (running, tail) =
                connect::open(&self.name, &self.config, &cwd, Handler::new(changes_tx)).await?;
            let tools = self
                .list(&running)
                .await
                .map_err(|e| connect::with_stderr(e, &tail))?;
            Ok::<_, String>((running, tail, tools))
        };
        let opened = tokio::select! {
            opened = tokio::time::timeout(limit, opening) => Some(opened),
            () = self.stop.cancelled() => None,
        };
        let (running, tail, tools) = match opened {
            None => return self.finish(),
            Some(Ok(Ok(opened))) => opened,
            Some(Ok(Err(error))) => return self.failed(error, "could not be started"),
            Some(Err(_)) => {
                let error = format!(
                    "no answer within {} ms (the server's `timeout`)",
                    limit.as_millis()
                );
                return self.failed(error, "could not be started");
            }
        };
        let count = tools.len();
        if !self
            .mcp
            .settle(&self.name, self.generation, McpStatus::Connected, tools)
        {
            // Disconnected or replaced meanwhile.
            return self.finish();
        }
        tracing::info!(server = %self.name, tools = count, "MCP server connected");
        self.finish_mut();
        self.follow(running, tail, &mut changes).await;
    }

    /// Serves the connection: re-lists the tools when the server says they changed, and
    /// reports the server when it goes away.
    async fn follow(
        &self,
        running: Running,
        tail: StderrTail,
        changes: &mut mpsc::UnboundedReceiver<()>,
    ) {
        let closer = running.cancellation_token();
        let peer = running.peer().clone();
        let waiting = running.waiting();
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                _ = &mut waiting => {
                    let error = connect::with_stderr("the server closed the connection".into(), &tail);
                    if self.mcp.settle(&self.name, self.generation, McpStatus::Failed { error: error.clone() }, Vec::new()) {
                        tracing::warn!(server = %self.name, "MCP server stopped: {error}");
                    }
                    return;
                }
                Some(()) = changes.recv() => {
                    match tokio::time::timeout(Duration::from_millis(self.config.connect_timeout_ms()), self.list_with(&peer)).await {
                        Ok(Ok(tools)) => {
                            let count = tools.len();
                            if self.mcp.settle(&self.name, self.generation, McpStatus::Connected, tools) {
                                tracing::info!(server = %self.name, tools = count, "MCP server's tools changed");
                            }
                        }
                        Ok(Err(e)) => tracing::warn!(server = %self.name, "listing the MCP server's tools failed: {e}"),
                        Err(_) => tracing::warn!(server = %self.name, "listing the MCP server's tools timed out"),
                    }
                }
                () = self.stop.cancelled() => {
                    closer.cancel();
                    let _ = tokio::time::timeout(CLOSE_WAIT, &mut waiting).await;
                    return;
                }
            }
        }
    }

    /// The server's tools.
    async fn list(&self, running: &Running) -> Result<Vec<Arc<dyn Tool>>, String> {
        self.list_with(running.peer()).await
    }

    /// The server's tools, listed through `peer`.
    async fn list_with(
        &self,
        peer: &rmcp::Peer<rmcp::RoleClient>,
    ) -> Result<Vec<Arc<dyn Tool>>, String> {
        let listed = peer
            .list_all_tools()
            .await
            .map_err(|e| format!("listing its tools failed: {e}"))?;
        let timeout =
            Duration::from_millis(self.config.call_timeout_ms(self.mcp.inner.call_timeout));
        Ok(listed
            .iter()
            .map(|tool| {
                Arc::new(McpTool::new(&self.name, tool, peer.clone(), timeout)) as Arc<dyn Tool>
            })
            .collect())
    }

    /// Records that the attempt failed with `error` (unless it is no longer current).
    fn failed(mut self, error: String, what: &str) {
        if self.mcp.settle(
            &self.name,
            self.generation,
            McpStatus::Failed {
                error: error.clone(),
            },
            Vec::new(),
        ) {
            tracing::warn!(server = %self.name, "MCP server {what}: {error}");
        }
        self.finish_mut();
    }

    /// Tells whoever waits that the attempt is over.
    fn finish(mut self) {
        self.finish_mut();
    }

    fn finish_mut(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}
