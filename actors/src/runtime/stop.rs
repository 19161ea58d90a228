//! Stopping a runtime: cleanly (every run cancelled as a user cancel would, its end committed)
//! or as a process exit would (everything stops where it is).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use taskforce_agents::id::SessionId;
use tokio::time::Instant;

use futures::StreamExt;

use super::Runtime;
use crate::bus::Filter;
use crate::supervisor::{CancelTree, StopAll};

/// The longest a stopping node waits for its last events to reach the cluster.
const CLUSTER_LEAVE: Duration = Duration::from_secs(2);

/// The least time left for stopping the actors and committing the queued writes once the runs
/// are cancelled, however long cancelling took.
const FINAL_WAIT: Duration = Duration::from_millis(500);

impl Runtime {
    /// Stops the runtime cleanly within about `within`: prompts are refused from now on, every
    /// running session and queued background child is cancelled as [`Runtime::cancel`] would
    /// (its tool calls are aborted, which kills their processes, and its end is committed),
    /// background results wait for the next runtime, and then the runtime stops as
    /// [`Runtime::shutdown`] does and releases its lock. What has not ended by then stops where
    /// it is, and the next runtime on the data directory repairs it.
    pub async fn stop(&self, within: Duration) {
        let deadline = Instant::now() + within;
        self.core.stopping.store(true, Ordering::SeqCst);
        // Woken by every event (a run ending publishes its status) and by every change of the
        // background children; each busy tree is told once.
        let mut events = self.core.bus.subscribe(Filter::All);
        let mut background = self.subagents.changes();
        let mut told: HashSet<SessionId> = HashSet::new();
        loop {
            let busy: Vec<SessionId> = self.core.statuses.iter().map(|e| e.key().clone()).collect();
            for id in busy {
                if told.contains(&id) {
                    continue;
                }
                // Each tree once is enough; a session already cancelled says so at once.
                if self
                    .supervisor
                    .send(CancelTree { id: id.clone() })
                    .await
                    .is_err()
                {
                    break;
                }
                told.insert(id);
            }
            self.subagents.cancel_queued();
            let settled = self.core.statuses.is_empty() && self.subagents.is_quiet();
            let last_call = deadline.checked_sub(FINAL_WAIT).unwrap_or(deadline);
            if settled || Instant::now() >= last_call {
                break;
            }
            tokio::select! {
                Some(_) = events.next() => {}
                Ok(()) = background.changed() => {}
                () = tokio::time::sleep_until(last_call) => {}
            }
        }
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(FINAL_WAIT);
        self.shutdown_within(left).await;
    }

    /// Stops the runtime as a process exit would: every session actor and running loop stops
    /// where it is (nothing more is recorded for them), the writes already queued are
    /// committed, the MCP servers are stopped (a local server's process is killed if it does
    /// not exit when asked), and the runtime's lock is released, so that another runtime on the same data
    /// directory takes over what it left (unfinished answers are repaired, background children
    /// reported interrupted, undelivered results delivered). Prompts afterwards fail with
    /// `Stopped`.
    pub async fn shutdown(&self) {
        self.core.stopping.store(true, Ordering::SeqCst);
        if let Ok(stopping) = self.supervisor.send(StopAll).await {
            // Released only once no session of this runtime runs any more.
            let _ = tokio::task::spawn_blocking(move || stopping.join()).await;
        }
        // The MCP servers stop while the last writes are committed (and this node's last
        // events reach the cluster, and its lease is given back).
        let leave = async {
            if let Some(cluster) = &self.cluster {
                cluster.leave(CLUSTER_LEAVE).await;
            }
        };
        let (_, flushed, ()) =
            futures::join!(self.core.mcp.shutdown(), self.core.store.flush(), leave);
        if let Err(e) = flushed {
            tracing::warn!("committing the last writes failed: {e}");
        }
        self.core.owner.release();
    }

    /// [`Runtime::shutdown`] that gives the session threads and the last writes `within`; the
    /// lock is released either way (the process is about to end).
    async fn shutdown_within(&self, within: Duration) {
        if tokio::time::timeout(within, self.shutdown()).await.is_err() {
            tracing::warn!("the runtime did not stop in time; releasing its lock");
            self.core.owner.release();
        }
    }
}
