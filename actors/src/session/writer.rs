//! Writing the session's state: to the store first, then to the bus.

use std::sync::Arc;

use taskforce_agents::model::{Message, Part, Session};

use crate::bus::{Event, SessionStatus};
use crate::core::Core;
use crate::store::StoreError;

/// Persists and publishes messages, parts and status of sessions.
#[derive(Clone)]
pub(crate) struct Writer {
    core: Arc<Core>,
}

impl Writer {
    pub fn new(core: Arc<Core>) -> Self {
        Writer { core }
    }

    /// Stores a message, then publishes `message.updated`.
    pub async fn message(&self, message: &Message) -> Result<(), StoreError> {
        self.core.store.put_message(message).await?;
        self.core.bus.publish(Event::MessageUpdated {
            info: message.clone(),
        });
        Ok(())
    }

    /// Stores a part, then publishes `message.part.updated` (the part is on disk first).
    pub async fn part(&self, part: &Part) -> Result<(), StoreError> {
        self.core.store.put_part(part).await?;
        self.core.bus.publish(Event::PartUpdated {
            part: part.clone(),
            delta: None,
        });
        Ok(())
    }

    /// Publishes a streaming delta of `part` without writing it (the caller flushes later).
    pub fn delta(&self, part: &Part, delta: String) {
        self.core.bus.publish(Event::PartUpdated {
            part: part.clone(),
            delta: Some(delta),
        });
    }

    /// Publishes a part update without writing it (live metadata of a running tool).
    pub fn part_live(&self, part: &Part) {
        self.core.bus.publish(Event::PartUpdated {
            part: part.clone(),
            delta: None,
        });
    }

    /// Publishes the session's status (and `session.idle` after an idle status).
    pub fn status(&self, session: &Session, status: SessionStatus) {
        let idle = status == SessionStatus::Idle;
        if idle {
            self.core.statuses.remove(&session.id);
        } else {
            self.core
                .statuses
                .insert(session.id.clone(), status.clone());
        }
        self.core.bus.publish(Event::SessionStatus {
            session_id: session.id.clone(),
            status,
        });
        if idle {
            self.core.bus.publish(Event::SessionIdle {
                session_id: session.id.clone(),
            });
        }
    }
}
