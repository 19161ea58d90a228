//! The questions agents ask the user, as an embedder or a client answers them.

use taskforce_agents::id::QuestionId;

use super::Runtime;
use crate::cluster::{AskOutcome, AskRequest};
use crate::question::{QuestionAnswer, QuestionReplyError, QuestionRequest};

impl Runtime {
    /// Every question waiting for the user, oldest first: in a cluster, those every live node
    /// holds.
    pub async fn pending_questions(&self) -> Vec<QuestionRequest> {
        let mut asks = self.core.questions.list();
        if let Some(cluster) = &self.cluster {
            let elsewhere = cluster.asks_elsewhere().await;
            asks.extend(elsewhere.questions.into_iter().map(|(_, ask)| ask));
            asks.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        }
        asks
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
        let reply = AskRequest::Answer {
            id: id.clone(),
            answers,
        };
        match self.forward(&reply).await {
            AskOutcome::Done => Ok(true),
            AskOutcome::Refused { error } => Err(error),
            AskOutcome::Unknown | AskOutcome::Held { .. } => Ok(false),
        }
    }

    /// Dismisses a pending question (its tool call fails and the run stops, as after a
    /// rejected permission); false when none is pending under that id.
    pub async fn reject_question(&self, id: &QuestionId) -> bool {
        self.core.questions.reject(id)
            || self.forward(&AskRequest::Dismiss { id: id.clone() }).await == AskOutcome::Done
    }

    /// Sends a reply to an ask this node does not hold to the node that holds it, in a
    /// cluster.
    pub(super) async fn forward(&self, reply: &AskRequest) -> AskOutcome {
        match &self.cluster {
            Some(cluster) => cluster.forward_reply(reply).await,
            None => AskOutcome::Unknown,
        }
    }
}
