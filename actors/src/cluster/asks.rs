//! Asks raised on one node answered from a client of another: a reply to a permission ask or
//! a question that this node does not hold goes to every node on `PREFIX.ask`; the node that
//! holds it answers it and says so, the others say they do not know it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use taskforce_agents::id::{PermissionId, QuestionId};
use taskforce_agents::permission::PermissionReply;
use taskforce_agents::question::QuestionAnswer;
use tokio_util::sync::CancellationToken;

use super::{ClusterError, Names};
use crate::permission::PermissionBroker;
use crate::question::{QuestionBroker, QuestionReplyError};

/// How long a forwarded reply waits for the node holding the ask.
const ANSWER_WAIT: Duration = Duration::from_secs(3);

/// A reply to an ask this node does not hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum AskReply {
    /// A reply to a permission ask.
    Permission {
        id: PermissionId,
        reply: PermissionReply,
        message: Option<String>,
    },
    /// Answers to a question.
    Answer {
        id: QuestionId,
        answers: Vec<QuestionAnswer>,
    },
    /// A question dismissed.
    Dismiss { id: QuestionId },
}

/// What became of a forwarded reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum AskOutcome {
    /// No node holds the ask.
    Unknown,
    /// The node holding it took the reply.
    Done,
    /// The node holding it refused the answers.
    Refused { error: QuestionReplyError },
}

/// How many nodes are live now (this one included).
pub(crate) type LiveNodes = Arc<dyn Fn() -> BoxFuture<'static, usize> + Send + Sync>;

/// This node's side of cross-node asks.
pub(crate) struct Asks {
    client: async_nats::Client,
    subject: String,
    live: LiveNodes,
    stop: CancellationToken,
}

impl Asks {
    /// Answers other nodes' replies to the asks `broker` and `questions` hold.
    pub(crate) async fn start(
        client: async_nats::Client,
        names: &Names,
        broker: Arc<PermissionBroker>,
        questions: Arc<QuestionBroker>,
        live: LiveNodes,
    ) -> Result<Arc<Asks>, ClusterError> {
        let subject = names.ask_subject();
        let mut requests = client
            .subscribe(subject.clone())
            .await
            .map_err(|e| ClusterError::jetstream("the ask subject", e))?;
        let asks = Arc::new(Asks {
            client: client.clone(),
            subject,
            live,
            stop: CancellationToken::new(),
        });
        let stop = asks.stop.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return,
                    next = requests.next() => next,
                };
                let Some(request) = next else { return };
                let Some(inbox) = request.reply.clone() else {
                    continue;
                };
                let outcome = match serde_json::from_slice::<AskReply>(&request.payload) {
                    Ok(reply) => take(&broker, &questions, reply).await,
                    Err(e) => {
                        tracing::warn!("dropping an unreadable ask reply: {e}");
                        continue;
                    }
                };
                let body = serde_json::to_vec(&outcome).unwrap_or_default();
                if let Err(e) = client.publish(inbox, body.into()).await {
                    tracing::warn!("cannot answer a forwarded ask reply: {e}");
                }
            }
        });
        Ok(asks)
    }

    /// Stops answering other nodes.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }

    /// Sends `reply` to every node and waits for the one that holds its ask (or for every
    /// live node to say it does not, or at most a few seconds).
    pub(crate) async fn forward(&self, reply: &AskReply) -> AskOutcome {
        let body = match serde_json::to_vec(reply) {
            Ok(body) => body,
            Err(_) => return AskOutcome::Unknown,
        };
        let inbox = self.client.new_inbox();
        let mut answers = match self.client.subscribe(inbox.clone()).await {
            Ok(answers) => answers,
            Err(e) => {
                tracing::warn!("cannot forward an ask reply: {e}");
                return AskOutcome::Unknown;
            }
        };
        if let Err(e) = self
            .client
            .publish_with_reply(self.subject.clone(), inbox, body.into())
            .await
        {
            tracing::warn!("cannot forward an ask reply: {e}");
            return AskOutcome::Unknown;
        }
        let expected = (self.live)().await.max(1);
        let mut heard = 0;
        let deadline = tokio::time::sleep(ANSWER_WAIT);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => return AskOutcome::Unknown,
                answer = answers.next() => {
                    let Some(answer) = answer else { return AskOutcome::Unknown };
                    match serde_json::from_slice::<AskOutcome>(&answer.payload) {
                        Ok(AskOutcome::Unknown) | Err(_) => {
                            heard += 1;
                            if heard >= expected {
                                return AskOutcome::Unknown;
                            }
                        }
                        Ok(outcome) => return outcome,
                    }
                }
            }
        }
    }
}

/// Gives `reply` to the ask this node holds, if it holds it.
async fn take(
    broker: &PermissionBroker,
    questions: &QuestionBroker,
    reply: AskReply,
) -> AskOutcome {
    let done = |held: bool| {
        if held {
            AskOutcome::Done
        } else {
            AskOutcome::Unknown
        }
    };
    match reply {
        AskReply::Permission { id, reply, message } => {
            done(broker.reply(&id, reply, message).await)
        }
        AskReply::Answer { id, answers } => match questions.reply(&id, answers) {
            Ok(held) => done(held),
            Err(error) => AskOutcome::Refused { error },
        },
        AskReply::Dismiss { id } => done(questions.reject(&id)),
    }
}
