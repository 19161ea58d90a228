//! Children run on other nodes of a cluster: the work a full node hands to the cluster's queue,
//! how its run ended, and the two sides of it — the calling node waiting for the end
//! ([`Subagents::run_elsewhere`]) and the node that took the work running it
//! ([`Subagents::run_taken`]).
//!
//! The calling node keeps everything that belongs to the call: the parent's slot, the clocks,
//! the mirror of the child's tool calls (its events reach every node through the cluster's
//! bus) and the result (read from the shared store). The taking node runs the child's session
//! in a share of its own `max_total`, flushes what it wrote, and reports the end.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::Session;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Subagents;
use super::admission::Share;
use super::call::start_child;
use crate::RuntimeError;
use crate::session::{AnswerBook, PromptInput, SubtaskRun};
use crate::store::{MessageWithParts, StoreError};

/// A child's run handed to the cluster: what the node that takes it needs to start it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlacedWork {
    /// The child session (not stored yet when `new`).
    pub session: Session,
    /// Whether the child is new (it has no messages yet).
    pub new: bool,
    /// The calling session.
    pub parent: SessionId,
    /// The child's task.
    pub input: PromptInput,
    /// The node whose call waits for it.
    pub origin: String,
}

/// How a placed child's run ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum PlacedEnd {
    /// It answered.
    Answered(MessageWithParts),
    /// It was cancelled before it answered.
    Cancelled,
    /// It failed, or the node running it was lost; the text says how.
    Failed(String),
}

impl PlacedEnd {
    /// The end of a run as a session actor reports it.
    pub(crate) fn of(reply: Result<MessageWithParts, RuntimeError>) -> Self {
        match reply {
            Ok(message) => PlacedEnd::Answered(message),
            Err(RuntimeError::Cancelled) => PlacedEnd::Cancelled,
            Err(e) => PlacedEnd::Failed(e.to_string()),
        }
    }

    /// The end as the calling node's task call takes it.
    fn into_reply(self) -> Result<MessageWithParts, RuntimeError> {
        match self {
            PlacedEnd::Answered(message) => Ok(message),
            PlacedEnd::Cancelled => Err(RuntimeError::Cancelled),
            PlacedEnd::Failed(message) => Err(RuntimeError::Elsewhere(message)),
        }
    }
}

/// The cluster as the subagents see it: where work goes when this node is full.
#[async_trait]
pub trait Placement: Send + Sync + 'static {
    /// Hands `work` to the cluster's work queue and waits until its run ended on whichever
    /// node took it (or that node was lost). Cancelling `abort` cancels the run there.
    async fn place(&self, work: PlacedWork, abort: CancellationToken) -> PlacedEnd;
}

impl Subagents {
    /// Joins a cluster as node `node`: from now on task calls that find this node full run
    /// their child elsewhere through `placement`.
    pub(crate) fn join_cluster(&self, node: &str, placement: Arc<dyn Placement>) {
        let _ = self.node.set(node.to_string());
        if self.placement.set(placement).is_ok() {
            self.limits.place_elsewhere();
        }
    }

    /// Whether task calls may run their child on another node.
    pub(crate) fn in_cluster(&self) -> bool {
        self.placement.get().is_some()
    }

    /// Starts a task call's child on another node: the run's reply comes when it ended there.
    /// The run is tied to the call (`within`): cancelling it cancels the run where it runs.
    pub(super) fn run_elsewhere(
        &self,
        session: Session,
        new: bool,
        parent: &SessionId,
        input: PromptInput,
        within: CancellationToken,
    ) -> Result<SubtaskRun, RuntimeError> {
        let placement = self.placement.get().cloned().ok_or(RuntimeError::Stopped)?;
        let work = PlacedWork {
            session,
            new,
            parent: parent.clone(),
            input,
            origin: self.node.get().cloned().unwrap_or_default(),
        };
        let (tx, reply) = oneshot::channel();
        tokio::spawn(async move {
            let end = placement.place(work, within).await;
            let _ = tx.send(end.into_reply());
        });
        Ok(SubtaskRun {
            reply,
            tied: true,
            answers: AnswerBook::unknown(),
        })
    }

    /// Runs work taken from the cluster's queue in `share` (a share of this node's
    /// `max_total`) until its child's run ends; what the child wrote is stored before the end
    /// is answered. Cancelling `abort` cancels the run.
    pub(crate) async fn run_taken(
        &self,
        work: PlacedWork,
        share: Share,
        abort: CancellationToken,
    ) -> PlacedEnd {
        let child = work.session.id.clone();
        let _slot = share.run(&child);
        self.core.bus.register_parent(&child, &work.parent);
        let started = start_child(
            &self.supervisor,
            work.session,
            work.new,
            Some(&work.parent),
            work.input,
            Some(abort),
            None,
        )
        .await;
        let end = match started {
            Ok(run) => match run.reply.await {
                Ok(reply) => PlacedEnd::of(reply),
                Err(_) => {
                    PlacedEnd::Failed(format!("subagent session {child} stopped unexpectedly"))
                }
            },
            Err(e) => PlacedEnd::of(Err(e)),
        };
        if let Err(e) = self.core.store.flush().await {
            return PlacedEnd::Failed(format!(
                "subagent session {child} ended but what it wrote could not be stored: {e}"
            ));
        }
        end
    }
}

impl Subagents {
    /// Waits until this node has room that none of its own calls takes.
    pub(crate) async fn room(&self) {
        self.limits.room().await;
    }

    /// A share of this node's `max_total` for work taken from the cluster's queue, if it has
    /// room now.
    pub(crate) fn try_share(&self) -> Option<Share> {
        self.limits.try_share()
    }

    /// How many more children this node could run now.
    pub(crate) fn free_room(&self) -> usize {
        self.limits.free()
    }

    /// The answer `message` of `child` as stored (a child that ran on another node).
    pub(crate) async fn stored_answer(
        &self,
        child: &SessionId,
        message: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        self.core.store.message(child, message).await
    }
}
