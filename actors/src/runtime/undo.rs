//! Undo and redo of a session's turns, and what its turns changed in the worktree.

use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{FileDiff, Session};

use super::Runtime;
use crate::RuntimeError;
use crate::session::{Undo, UndoTurns, session_diff};

impl Runtime {
    /// Reverts the session to before `message` (or before `part` of it): the messages from
    /// there on are hidden and the files their turns (and their subagents, at any depth)
    /// changed are put back as they were; `Busy` while the session runs. The next prompt drops
    /// the hidden messages for good; [`Runtime::unrevert`] brings everything back.
    pub async fn revert(
        &self,
        id: &SessionId,
        message: &MessageId,
        part: Option<&PartId>,
    ) -> Result<Session, RuntimeError> {
        let undo = Undo::Revert {
            message: message.clone(),
            part: part.cloned(),
        };
        self.undo(id, undo).await
    }

    /// Undoes the session's revert: its messages show again and the files are put back as
    /// they were before the revert; `Busy` while the session runs.
    pub async fn unrevert(&self, id: &SessionId) -> Result<Session, RuntimeError> {
        self.undo(id, Undo::Unrevert).await
    }

    /// The files the session's turns changed, as they are now (up to its revert point), or
    /// those of the one turn `message` starts.
    pub async fn diff(
        &self,
        id: &SessionId,
        message: Option<&MessageId>,
    ) -> Result<Vec<FileDiff>, RuntimeError> {
        let session = self.session(id).await?;
        let messages = self.messages(id).await?;
        session_diff(&self.core, &session, &messages, message).await
    }

    async fn undo(&self, id: &SessionId, undo: Undo) -> Result<Session, RuntimeError> {
        self.send_to_actor(id, || UndoTurns(undo.clone()))
            .await?
            .await
            .map_err(|_| RuntimeError::Crashed(id.to_string()))?
    }
}
