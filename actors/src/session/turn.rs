//! One model turn: the answer a step writes, the parts it has so far, and what it works with.

use std::sync::Arc;

use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::MessageId;
use taskforce_agents::model::{ModelRef, Part, PartKind, Session};
use tokio_util::sync::CancellationToken;

use super::part::SharedPart;
use super::writer::{Held, Writer};
use crate::core::Core;

/// What one model turn works with: the session it answers in, the agent and model answering,
/// the answer's id and parts, where they are written, and what cancels the turn.
pub(super) struct Turn {
    pub core: Arc<Core>,
    pub writer: Writer,
    pub session: Arc<Session>,
    pub agent: Arc<AgentInfo>,
    pub model: ModelRef,
    /// The answer (assistant message) the turn writes.
    pub message_id: MessageId,
    pub token: CancellationToken,
    /// Every part of the answer, in creation order.
    pub parts: Vec<SharedPart>,
    /// Written before the answer's opening, in its commit (see [`Held`]).
    pub held: Held,
}

impl Turn {
    /// A new part of the answer, of `kind`, appended to its parts.
    pub fn new_part(&mut self, kind: PartKind) -> SharedPart {
        let part = SharedPart::new(Part::new(
            self.session.id.clone(),
            self.message_id.clone(),
            kind,
        ));
        self.parts.push(part.clone());
        part
    }
}
