//! The questions agents ask the user, as an embedder or a client answers them.

use taskforce_agents::id::QuestionId;

use super::Runtime;
use crate::question::{QuestionAnswer, QuestionReplyError, QuestionRequest};

impl Runtime {
    /// Every question waiting for the user, oldest first.
    pub fn pending_questions(&self) -> Vec<QuestionRequest> {
        self.core.questions.list()
    }

    /// Answers a pending question (the labels picked, one list per question); false when none
    /// is pending under that id.
    pub fn reply_question(
        &self,
        id: &QuestionId,
        answers: Vec<QuestionAnswer>,
    ) -> Result<bool, QuestionReplyError> {
        self.core.questions.reply(id, answers)
    }

    /// Dismisses a pending question (its tool call fails and the run stops, as after a
    /// rejected permission); false when none is pending under that id.
    pub fn reject_question(&self, id: &QuestionId) -> bool {
        self.core.questions.reject(id)
    }
}
