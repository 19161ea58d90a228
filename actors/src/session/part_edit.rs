//! A client's edit of a stored part, while the session does not run: removed, or replaced by
//! a new state of itself. What the actor remembers of the session follows.

use std::sync::{Arc, Mutex};

use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::Part;

use super::state::{LoopState, load, lock};
use crate::RuntimeError;
use crate::bus::Event;
use crate::core::Core;

/// What to do to a part.
#[derive(Debug, Clone)]
pub(crate) enum PartEdit {
    /// Remove it.
    Remove { message: MessageId, part: PartId },
    /// Replace it with this state (same ids).
    Update(Box<Part>),
}

/// Applies `edit` to session `id`; answers the part as it is after (none once removed).
pub(crate) async fn run_part_edit(
    core: Arc<Core>,
    id: SessionId,
    state: Arc<Mutex<LoopState>>,
    edit: PartEdit,
) -> Result<Option<Part>, RuntimeError> {
    let (_session, mut messages, unsaved) = load(&core, &id, &state).await?;
    let (message, part) = match &edit {
        PartEdit::Remove { message, part } => (message.clone(), part.clone()),
        PartEdit::Update(p) => (p.message_id.clone(), p.id.clone()),
    };
    let result = async {
        let Some(m) = messages.iter_mut().find(|m| *m.info.id() == message) else {
            return Err(RuntimeError::MessageNotFound(message.to_string()));
        };
        let Some(at) = m.parts.iter().position(|p| p.id == part) else {
            return Err(RuntimeError::InvalidInput(format!(
                "part {part} is not a part of message {message}"
            )));
        };
        match edit {
            PartEdit::Remove { .. } => {
                core.store.remove_part(&part).await?;
                m.parts.remove(at);
                core.bus.publish(Event::PartRemoved {
                    session_id: id.clone(),
                    message_id: message,
                    part_id: part,
                });
                Ok(None)
            }
            PartEdit::Update(new) => {
                if new.session_id != id {
                    return Err(RuntimeError::InvalidInput(format!(
                        "the part names session {}, not {id}",
                        new.session_id
                    )));
                }
                let new = Arc::new(*new);
                core.store.put_part(&new).await?;
                m.parts[at] = new.clone();
                core.bus.publish(Event::PartUpdated { part: new.clone() });
                Ok(Some((*new).clone()))
            }
        }
    }
    .await;
    let mut state = lock(&state);
    state.history = Some(messages);
    state.unsaved = unsaved;
    result
}
