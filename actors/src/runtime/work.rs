//! What still goes on in a session tree (busy sessions, background children and their
//! results), and waiting for it to change.

use futures::StreamExt;
use taskforce_agents::id::SessionId;
use taskforce_agents::tool::background::ChildStatus;
use tokio::sync::watch;

use super::Runtime;
use crate::RuntimeError;
use crate::bus::{Filter, Subscription};
use crate::subagent::is_within;

/// What still goes on in a session tree (see [`Runtime::pending_work`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingWork {
    /// A session of the tree is running its loop.
    pub busy: bool,
    /// Background children of the tree still queued or running.
    pub running: usize,
    /// Background children of the tree that ended and whose results are not delivered yet
    /// (a delivery counts once its receiving session has answered it).
    pub undelivered: usize,
}

impl PendingWork {
    /// Nothing is left to wait for.
    pub fn is_done(&self) -> bool {
        !self.busy && self.running == 0 && self.undelivered == 0
    }
}

/// Waits for changes of what [`Runtime::pending_work`] counts in one tree (see
/// [`Runtime::watch_work`]).
pub struct WorkWatch {
    events: Subscription,
    background: watch::Receiver<u64>,
}

impl WorkWatch {
    /// Returns once something the tree's pending work counts may have changed: an event of the
    /// tree, or a background child of the runtime queued, ended or delivered.
    pub async fn changed(&mut self) {
        tokio::select! {
            Some(_) = self.events.next() => {}
            Ok(()) = self.background.changed() => {}
            else => std::future::pending().await,
        }
    }
}

impl Runtime {
    /// What still goes on in `id`'s tree: whether a session of it is busy, and its background
    /// children (started by `id` or a descendant) whose results have not reached their parents.
    pub async fn pending_work(&self, id: &SessionId) -> Result<PendingWork, RuntimeError> {
        let mut work = PendingWork::default();
        let busy: Vec<SessionId> = self.core.statuses.iter().map(|e| e.key().clone()).collect();
        for session in busy {
            if self.within(&session, id).await? {
                work.busy = true;
                break;
            }
        }
        for record in self.core.store.undelivered_background().await? {
            if self.within(&record.parent_id, id).await? {
                match record.status {
                    ChildStatus::Queued | ChildStatus::Running => work.running += 1,
                    _ => work.undelivered += 1,
                }
            }
        }
        Ok(work)
    }

    /// Delivers the background results earlier runtimes left undelivered in `id`'s tree, and
    /// records the children a dead runtime left running there as interrupted (their results are
    /// delivered too); for a runtime started without `deliver_background`. Returns once the
    /// records are sorted; the deliveries go on (see [`Runtime::pending_work`]).
    pub async fn deliver_pending(&self, id: &SessionId) {
        self.subagents.deliver_pending(Some(id)).await;
    }

    async fn within(&self, session: &SessionId, root: &SessionId) -> Result<bool, RuntimeError> {
        Ok(is_within(&*self.core.store, session, root).await?)
    }

    /// Watches `id`'s tree for changes of its pending work: read [`Runtime::pending_work`] after
    /// making the watch, then wait on [`WorkWatch::changed`] before reading it again.
    pub fn watch_work(&self, id: &SessionId) -> WorkWatch {
        WorkWatch {
            events: self.core.bus.subscribe(Filter::Subtree(id.clone())),
            background: self.subagents.changes(),
        }
    }
}
