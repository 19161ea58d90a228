//! Undo and redo of turns: a revert hides a session's messages from a point on and puts back
//! the files they (and the subagents they started, at any depth) changed; an unrevert brings
//! the files back; the session's next prompt drops what stayed reverted for good.

use std::sync::{Arc, Mutex};

use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{FileDiff, PartKind, Session, SessionRevert};

use super::state::{LoopState, load, lock};
use crate::RuntimeError;
use crate::bus::Event;
use crate::core::Core;
use crate::store::MessageWithParts;

/// An undo or a redo.
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    /// Revert the session to before `message` (or before `part` of it).
    Revert {
        message: MessageId,
        part: Option<PartId>,
    },
    /// Bring back what the last revert undid.
    Unrevert,
}

/// A step's record of what it changed: its id orders it among the others.
struct Patch {
    order: PartId,
    hash: String,
    files: Vec<String>,
}

/// Runs `undo` on the session, which no loop runs; answers the session as it is after.
pub(crate) async fn run_undo(
    core: Arc<Core>,
    id: SessionId,
    state: Arc<Mutex<LoopState>>,
    undo: Undo,
) -> Result<Session, RuntimeError> {
    let (session, messages, unsaved) = load(&core, &id, &state).await?;
    let result = match undo {
        Undo::Revert { message, part } => {
            revert(&core, &state, &session, &messages, message, part).await
        }
        Undo::Unrevert => unrevert(&core, &state, &session, &messages).await,
    };
    let mut state = lock(&state);
    state.history = Some(messages);
    state.unsaved = unsaved;
    result
}

async fn revert(
    core: &Arc<Core>,
    state: &Mutex<LoopState>,
    session: &Session,
    messages: &[MessageWithParts],
    message: MessageId,
    part: Option<PartId>,
) -> Result<Session, RuntimeError> {
    let Some(at) = messages.iter().position(|m| *m.info.id() == message) else {
        return Err(RuntimeError::MessageNotFound(message.to_string()));
    };
    if let Some(part) = &part
        && !messages[at].parts.iter().any(|p| p.id == *part)
    {
        return Err(RuntimeError::InvalidInput(format!(
            "part {part} is not a part of message {message}"
        )));
    }
    let patches = patches_from(core, session, messages, at, part.as_ref()).await?;
    let dir = &session.directory;
    // A revert further back keeps the snapshot of before the first one: redo goes all the way.
    let snapshot = match session.revert.as_ref().and_then(|r| r.snapshot.clone()) {
        Some(s) => Some(s),
        None => core.snapshots.track(dir).await.map(|t| t.hash),
    };
    let restores = restores(&patches);
    // What the undone turns changed, as they left it.
    let diffs = core.snapshots.diffs(dir, &restores).await;
    core.snapshots.revert(dir, &restores).await;
    let diff = match &snapshot {
        Some(s) => Some(core.snapshots.patch_text(dir, s).await),
        None => None,
    };
    let revert = SessionRevert {
        message_id: message,
        part_id: part,
        snapshot,
        diff: diff.filter(|d| !d.is_empty()),
    };
    let updated = change(core, state, &session.id, |s| s.revert = Some(revert)).await?;
    publish_diff(core, &session.id, diffs);
    Ok(updated)
}

async fn unrevert(
    core: &Arc<Core>,
    state: &Mutex<LoopState>,
    session: &Session,
    messages: &[MessageWithParts],
) -> Result<Session, RuntimeError> {
    let Some(revert) = session.revert.clone() else {
        return Ok(session.clone());
    };
    if let Some(snapshot) = &revert.snapshot
        && let Some(at) = messages
            .iter()
            .position(|m| *m.info.id() == revert.message_id)
    {
        let patches = patches_from(core, session, messages, at, revert.part_id.as_ref()).await?;
        core.snapshots
            .revert(&session.directory, &with_hash(&patches, snapshot))
            .await;
    }
    let updated = change(core, state, &session.id, |s| s.revert = None).await?;
    publish_diff(core, &session.id, Vec::new());
    Ok(updated)
}

/// Drops for good what a revert hid, once the session goes on: the messages from the revert
/// point (or the parts from it, within its message), each removal published. Answers the
/// session as it is after.
pub(crate) async fn drop_reverted(
    core: &Arc<Core>,
    state: &Mutex<LoopState>,
    session: Arc<Session>,
    messages: &mut Vec<MessageWithParts>,
) -> Result<Arc<Session>, RuntimeError> {
    let Some(revert) = &session.revert else {
        return Ok(session);
    };
    if let Some(at) = messages
        .iter()
        .position(|m| *m.info.id() == revert.message_id)
    {
        let mut from = at;
        if let Some(part) = &revert.part_id {
            let kept = &mut messages[at];
            if let Some(p) = kept.parts.iter().position(|x| x.id == *part) {
                for gone in kept.parts.drain(p..) {
                    core.store.remove_part(&gone.id).await?;
                    core.bus.publish(Event::PartRemoved {
                        session_id: session.id.clone(),
                        message_id: revert.message_id.clone(),
                        part_id: gone.id.clone(),
                    });
                }
            }
            from = at + 1;
        }
        for gone in messages.drain(from..) {
            core.store
                .remove_message(&session.id, gone.info.id())
                .await?;
            core.bus.publish(Event::MessageRemoved {
                session_id: session.id.clone(),
                message_id: gone.info.id().clone(),
            });
        }
    }
    Ok(Arc::new(
        change(core, state, &session.id, |s| s.revert = None).await?,
    ))
}

/// The patches of the messages from `at` (from `part` on, within it) and of every subagent
/// they started, at any depth, in the order their snapshots were taken.
async fn patches_from(
    core: &Core,
    session: &Session,
    messages: &[MessageWithParts],
    at: usize,
    part: Option<&PartId>,
) -> Result<Vec<Patch>, RuntimeError> {
    patches_between(core, session, messages, at, messages.len(), part).await
}

/// The patches of `messages[at..end]` (from `part` on, within the first) and of every subagent
/// started meanwhile, at any depth, in the order their snapshots were taken.
async fn patches_between(
    core: &Core,
    session: &Session,
    messages: &[MessageWithParts],
    at: usize,
    end: usize,
    part: Option<&PartId>,
) -> Result<Vec<Patch>, RuntimeError> {
    let mut patches = Vec::new();
    let Some(first) = messages.get(at) else {
        return Ok(patches);
    };
    for (i, m) in messages[at..end].iter().enumerate() {
        let start = match (i, part) {
            (0, Some(p)) => m.parts.iter().position(|x| x.id == *p).unwrap_or(0),
            _ => 0,
        };
        collect(&m.parts[start..], &mut patches);
    }
    // Subagents started within the range, and theirs.
    let since = first.info.created();
    let until = messages.get(end).map_or(u64::MAX, |m| m.info.created());
    let mut queue: Vec<SessionId> = core
        .store
        .children(&session.id)
        .await?
        .into_iter()
        .filter(|c| c.time.created >= since && c.time.created < until)
        .map(|c| c.id)
        .collect();
    while let Some(child) = queue.pop() {
        for m in core.store.messages(&child).await? {
            collect(&m.parts, &mut patches);
        }
        queue.extend(core.store.children(&child).await?.into_iter().map(|c| c.id));
    }
    patches.sort_by(|a, b| a.order.as_str().cmp(b.order.as_str()));
    Ok(patches)
}

/// What the session's turns changed, file by file, as the worktree is now: the whole session
/// up to a revert point, or the one turn `message` starts.
pub(crate) async fn session_diff(
    core: &Core,
    session: &Session,
    messages: &[MessageWithParts],
    message: Option<&MessageId>,
) -> Result<Vec<FileDiff>, RuntimeError> {
    let reverted = session
        .revert
        .as_ref()
        .and_then(|r| messages.iter().position(|m| *m.info.id() == r.message_id));
    let (at, end) = match message {
        Some(id) => {
            let Some(at) = messages.iter().position(|m| m.info.id() == id) else {
                return Err(RuntimeError::MessageNotFound(id.to_string()));
            };
            // The turn runs until the next prompt.
            let end = messages[at + 1..]
                .iter()
                .position(|m| m.info.as_user().is_some())
                .map_or(messages.len(), |n| at + 1 + n);
            (at, end)
        }
        None => (0, reverted.unwrap_or(messages.len())),
    };
    let patches = patches_between(core, session, messages, at, end, None).await?;
    Ok(core
        .snapshots
        .diffs(&session.directory, &restores(&patches))
        .await)
}

/// The patch parts among `parts`.
fn collect(parts: &[Arc<taskforce_agents::model::Part>], into: &mut Vec<Patch>) {
    for p in parts {
        if let PartKind::Patch(patch) = &p.kind {
            into.push(Patch {
                order: p.id.clone(),
                hash: patch.hash.clone(),
                files: patch.files.clone(),
            });
        }
    }
}

/// Each changed file with the snapshot from before its first change.
fn restores(patches: &[Patch]) -> Vec<(String, String)> {
    patches
        .iter()
        .flat_map(|p| p.files.iter().map(|f| (p.hash.clone(), f.clone())))
        .collect()
}

/// Each changed file with `hash`.
fn with_hash(patches: &[Patch], hash: &str) -> Vec<(String, String)> {
    patches
        .iter()
        .flat_map(|p| p.files.iter().map(|f| (hash.to_string(), f.clone())))
        .collect()
}

/// Applies `edit` to the stored session in place (so that a title set meanwhile stays, and a
/// session deleted meanwhile stays deleted), publishes it, and makes it what the actor
/// remembers. A session the actor knows but has not stored yet is stored whole.
async fn change(
    core: &Core,
    state: &Mutex<LoopState>,
    id: &SessionId,
    edit: impl FnOnce(&mut Session) + Clone + Send + 'static,
) -> Result<Session, RuntimeError> {
    let edit_stored = edit.clone();
    let stored = core
        .store
        .update_session(
            id,
            Box::new(move |s: &mut Session| {
                edit_stored(s);
                true
            }),
        )
        .await?;
    // As stored: a newer time.updated written meanwhile stays.
    let session = match stored {
        Some(s) => s,
        None => {
            let Some(known) = lock(state).session.clone() else {
                return Err(RuntimeError::SessionNotFound(id.to_string()));
            };
            let mut session = (*known).clone();
            edit(&mut session);
            core.store.put_session(&session).await?;
            session
        }
    };
    // One shared copy for the actor's state and the event.
    let shared = Arc::new(session.clone());
    lock(state).session = Some(shared.clone());
    core.bus.publish(Event::SessionUpdated { info: shared });
    Ok(session)
}

/// How many patch parts `messages` hold: a turn that added some changed files.
pub(crate) fn patch_count(messages: &[MessageWithParts]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter(|p| matches!(p.kind, PartKind::Patch(_)))
        .count()
}

/// Publishes, once worked out, what the session's turns have changed so far (OpenCode's
/// clients list it as the session's modified files).
pub(crate) fn publish_session_diff(
    core: Arc<Core>,
    session: Arc<Session>,
    messages: Vec<MessageWithParts>,
) {
    tokio::spawn(async move {
        match session_diff(&core, &session, &messages, None).await {
            Ok(diff) => publish_diff(&core, &session.id, diff),
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "cannot work out the session's diff")
            }
        }
    });
}

/// Publishes what the session's undone turns changed (empty after a redo).
fn publish_diff(core: &Core, id: &SessionId, diff: Vec<FileDiff>) {
    core.bus.publish(Event::SessionDiff {
        session_id: id.clone(),
        diff,
    });
}
