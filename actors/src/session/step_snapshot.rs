//! A step's snapshot of the worktree: taken before the step's first call that may change files,
//! and compared with the worktree once the step's calls are over, so that the step can be undone.

use std::path::PathBuf;
use std::sync::Arc;

use taskforce_agents::model::{Part, PatchPart};
use tokio::sync::OnceCell;

use super::turn::Turn;
use crate::core::Core;
use crate::snapshot::Taken;

/// The snapshot one step takes, at most once.
pub(super) struct StepSnapshot {
    core: Arc<Core>,
    dir: PathBuf,
    before: OnceCell<Option<Taken>>,
}

impl StepSnapshot {
    /// None taken yet, of the worktree holding `dir`.
    pub fn new(core: Arc<Core>, dir: PathBuf) -> Arc<Self> {
        Arc::new(StepSnapshot {
            core,
            dir,
            before: OnceCell::new(),
        })
    }

    /// Takes the snapshot unless taken already: called before a call that may change files.
    pub async fn before_change(&self) {
        self.before
            .get_or_init(|| self.core.snapshots.track(&self.dir))
            .await;
    }

    /// Whether a snapshot was taken before a call of this step changed files.
    pub fn taken(&self) -> bool {
        self.before.get().is_some_and(Option::is_some)
    }

    /// The step's `patch` part, when a snapshot was taken and files changed since: it names
    /// the snapshot and the changed files, and its id is the one minted with the snapshot, so
    /// that patches sort as their snapshots were taken.
    pub async fn patch(&self, turn: &Turn) -> Option<Part> {
        let before = self.before.get()?.as_ref()?;
        let files = self
            .core
            .snapshots
            .changed_since(&self.dir, &before.hash)
            .await;
        if files.is_empty() {
            return None;
        }
        Some(Part {
            id: before.order.clone(),
            session_id: turn.session.id.clone(),
            message_id: turn.message_id.clone(),
            kind: PatchPart {
                hash: before.hash.clone(),
                files,
            }
            .into(),
        })
    }
}
