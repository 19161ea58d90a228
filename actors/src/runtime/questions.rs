//! The questions agents ask the user, as an embedder or a client answers them.

use taskforce_agents::id::QuestionId;

use super::Runtime;
use crate::cluster::{AskOutcome, AskReply};
use crate::question::{QuestionAnswer, QuestionReplyError, QuestionRequest};

impl Runtime {
    /// Every question waiting for the user, oldest first.
    pub fn pending_questions(&self) -> Vec<QuestionRequest> {
        self.core.questions.list()
    }

    /// Answers a pending question (the labels picked, one list per question); false when none
    /// is pending under that id.
    pub async fn reply_question(
        &self,
        id: &QuestionId,
        answers: Vec<QuestionAnswer>,
    ) -> Result<bool, QuestionReplyError> {
        // Checked here first: a question of this node is answered without a word to the
        // others.
        if self.core.questions.reply(id, answers.clone())? {
            return Ok(true);
        }
        let reply = AskReply::Answer {
            id: id.clone(),
            answers,
        };
        match self.forward(&reply).await {
            AskOutcome::Done => Ok(true),
            AskOutcome::Refused { error } => Err(error),
            AskOutcome::Unknown => Ok(false),
        }
    }

    /// Dismisses a pending question (its tool call fails and the run stops, as after a
    /// rejected permission); false when none is pending under that id.
    pub async fn reject_question(&self, id: &QuestionId) -> bool {
        self.core.questions.reject(id)
            || self.forward(&AskReply::Dismiss { id: id.clone() }).await == AskOutcome::Done
    }

    /// Sends a reply to an ask this node does not hold to the node that holds it, in a
    /// cluster.
    pub(super) async fn forward(&self, reply: &AskReply) -> AskOutcome {
        match &self.cluster {
            Some(cluster) => cluster.forward_reply(reply).await,
            None => AskOutcome::Unknown,
        }
    }
}
