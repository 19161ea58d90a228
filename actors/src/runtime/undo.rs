//! Undo and redo of a session's turns, what its turns changed in the worktree, and a client's
//! edits of stored parts.

use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{FileDiff, Part, Session};

use super::Runtime;
use crate::RuntimeError;
use crate::session::{EditPart, PartEdit, Undo, UndoTurns, session_diff};

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

    /// Removes a part of a stored message; `Busy` while the session runs.
    pub async fn remove_part(
        &self,
        id: &SessionId,
        message: &MessageId,
        part: &PartId,
    ) -> Result<(), RuntimeError> {
        let edit = PartEdit::Remove {
            message: message.clone(),
            part: part.clone(),
        };
        self.edit_part(id, edit).await.map(|_| ())
    }

    /// Replaces a stored part with `part` (same ids); `Busy` while the session runs.
    pub async fn update_part(&self, id: &SessionId, part: Part) -> Result<Part, RuntimeError> {
        let edit = PartEdit::Update(Box::new(part.clone()));
        Ok(self.edit_part(id, edit).await?.unwrap_or(part))
    }

    async fn edit_part(
        &self,
        id: &SessionId,
        edit: PartEdit,
    ) -> Result<Option<Part>, RuntimeError> {
        self.send_to_actor(id, || EditPart(edit.clone()))
            .await?
            .await
            .map_err(|_| RuntimeError::Crashed(id.to_string()))?
    }

    async fn undo(&self, id: &SessionId, undo: Undo) -> Result<Session, RuntimeError> {
        self.send_to_actor(id, || UndoTurns(undo.clone()))
            .await?
            .await
            .map_err(|_| RuntimeError::Crashed(id.to_string()))?
    }
}
