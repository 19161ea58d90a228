//! Asks raised on one node listed and answered from a client of another: a reply to a
//! permission ask or a question that this node does not hold goes to every node on
//! `PREFIX.ask`; the node that holds it answers it and says so, the others say they do not
//! know it. A request for the list is answered by every live node with the asks it holds.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use taskforce_agents::id::{PermissionId, QuestionId};
use taskforce_agents::permission::{PermissionReply, PermissionRequest};
use taskforce_agents::question::{QuestionAnswer, QuestionRequest};
use tokio_util::sync::CancellationToken;

use super::{ClusterError, Names};
use crate::permission::PermissionBroker;
use crate::question::{QuestionBroker, QuestionReplyError};

/// How long a forwarded reply waits for the node holding the ask.
const ANSWER_WAIT: Duration = Duration::from_secs(3);
/// How long a request for the list waits for the other live nodes.
const LIST_WAIT: Duration = Duration::from_secs(1);

/// What one node asks the others about asks: to take a reply to an ask it does not hold, or
/// for the asks they hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum AskRequest {
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
    /// Every ask the node holds, please.
    List,
}

/// What became of a forwarded reply, or what a node holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum AskOutcome {
    /// No node holds the ask.
    Unknown,
    /// The node holding it took the reply.
    Done,
    /// The node holding it refused the answers.
    Refused { error: QuestionReplyError },
    /// The asks a node holds.
    Held {
        permissions: Vec<PermissionRequest>,
        questions: Vec<QuestionRequest>,
    },
}

/// One node's answer to an [`AskRequest`]: which node answers, and what it says.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    node: String,
    #[serde(flatten)]
    outcome: AskOutcome,
}

/// Which nodes' answers a request waits for: every live node but the asking one, or (when the
/// live nodes cannot be read) the first other node to answer. The asking node's own answer
/// never counts: its lease may not be written yet as it joins.
struct Awaited {
    me: String,
    others: Option<HashSet<String>>,
    heard: HashSet<String>,
}

impl Awaited {
    /// Waits for the nodes of `live` other than `me`.
    fn new(me: &str, live: Option<Vec<String>>) -> Awaited {
        let others = live.map(|live| live.into_iter().filter(|n| n != me).collect());
        Awaited {
            me: me.to_string(),
            others,
            heard: HashSet::new(),
        }
    }

    /// Whether the live nodes could be read.
    fn knows_live(&self) -> bool {
        self.others.is_some()
    }

    /// Whether `node` is another node with a live lease (any other node when the live nodes
    /// cannot be read).
    fn is_other_live(&self, node: &str) -> bool {
        node != self.me
            && self
                .others
                .as_ref()
                .is_none_or(|others| others.contains(node))
    }

    /// Notes that `node` answered (the asking node's own answer aside).
    fn heard(&mut self, node: String) {
        if node != self.me {
            self.heard.insert(node);
        }
    }

    /// Whether every awaited node has answered.
    fn all_heard(&self) -> bool {
        match &self.others {
            Some(others) => others.iter().all(|n| self.heard.contains(n)),
            None => !self.heard.is_empty(),
        }
    }
}

/// The asks the other live nodes hold, each with the node holding it.
#[derive(Debug, Default)]
pub(crate) struct Elsewhere {
    /// Permission asks, by node.
    pub(crate) permissions: Vec<(String, PermissionRequest)>,
    /// Questions, by node.
    pub(crate) questions: Vec<(String, QuestionRequest)>,
    /// Every live node answered.
    pub(crate) complete: bool,
}

/// The nodes with a live lease now, as far as this node can read (`None`: it cannot read them).
pub(crate) type LiveNodes = Arc<dyn Fn() -> BoxFuture<'static, Option<Vec<String>>> + Send + Sync>;

/// This node's side of cross-node asks.
pub(crate) struct Asks {
    client: async_nats::Client,
    subject: String,
    node: Arc<str>,
    live: LiveNodes,
    stop: CancellationToken,
}

impl Asks {
    /// Answers other nodes' replies to the asks `broker` and `questions` hold, and their
    /// requests for the list, as node `node`.
    pub(crate) async fn start(
        client: async_nats::Client,
        names: &Names,
        node: Arc<str>,
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
            node: node.clone(),
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
                let outcome = match serde_json::from_slice::<AskRequest>(&request.payload) {
                    Ok(AskRequest::List) => AskOutcome::Held {
                        permissions: broker.list(),
                        questions: questions.list(),
                    },
                    Ok(reply) => take(&broker, &questions, reply).await,
                    Err(e) => {
                        tracing::warn!("dropping an unreadable ask reply: {e}");
                        continue;
                    }
                };
                let answer = Answer {
                    node: node.to_string(),
                    outcome,
                };
                let body = serde_json::to_vec(&answer).unwrap_or_default();
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
    /// other live node to say it does not, or at most a few seconds).
    pub(crate) async fn forward(&self, reply: &AskRequest) -> AskOutcome {
        let Some((mut answers, live)) = self.send(reply).await else {
            return AskOutcome::Unknown;
        };
        let mut awaited = Awaited::new(&self.node, live);
        let deadline = tokio::time::sleep(ANSWER_WAIT);
        tokio::pin!(deadline);
        while !awaited.all_heard() {
            tokio::select! {
                () = &mut deadline => break,
                answer = answers.next() => {
                    let Some(answer) = answer else { break };
                    let Ok(answer) = serde_json::from_slice::<Answer>(&answer.payload) else {
                        continue;
                    };
                    if let AskOutcome::Done | AskOutcome::Refused { .. } = answer.outcome {
                        return answer.outcome;
                    }
                    awaited.heard(answer.node);
                }
            }
        }
        AskOutcome::Unknown
    }

    /// The asks every other live node holds: each answers with its own. A node that does not
    /// answer within a second (dying, or cut off) is left out, and so is one whose lease has
    /// lapsed: the others take it for dead and have closed its asks. The list is complete
    /// once every other live node has answered, whatever order the answers come in.
    pub(crate) async fn elsewhere(&self) -> Elsewhere {
        let mut found = Elsewhere::default();
        let Some((mut answers, live)) = self.send(&AskRequest::List).await else {
            return found;
        };
        let mut awaited = Awaited::new(&self.node, live);
        let deadline = tokio::time::sleep(LIST_WAIT);
        tokio::pin!(deadline);
        let deadline_passed = loop {
            if awaited.knows_live() && awaited.all_heard() {
                break false;
            }
            tokio::select! {
                () = &mut deadline => break true,
                answer = answers.next() => {
                    let Some(answer) = answer else { break true };
                    let Ok(Answer { node, outcome: AskOutcome::Held { permissions, questions } }) =
                        serde_json::from_slice::<Answer>(&answer.payload)
                    else {
                        continue;
                    };
                    if !awaited.is_other_live(&node) {
                        continue;
                    }
                    found.permissions.extend(permissions.into_iter().map(|p| (node.clone(), p)));
                    found.questions.extend(questions.into_iter().map(|q| (node.clone(), q)));
                    awaited.heard(node);
                }
            }
        };
        found.complete = !deadline_passed && awaited.knows_live();
        found
    }

    /// Sends `request` to every node (this one included) with an inbox for their answers;
    /// answers the inbox and the live nodes.
    async fn send(
        &self,
        request: &AskRequest,
    ) -> Option<(async_nats::Subscriber, Option<Vec<String>>)> {
        let body = serde_json::to_vec(request).ok()?;
        let inbox = self.client.new_inbox();
        let answers = match self.client.subscribe(inbox.clone()).await {
            Ok(answers) => answers,
            Err(e) => {
                tracing::warn!("cannot ask the other nodes about asks: {e}");
                return None;
            }
        };
        if let Err(e) = self
            .client
            .publish_with_reply(self.subject.clone(), inbox, body.into())
            .await
        {
            tracing::warn!("cannot ask the other nodes about asks: {e}");
            return None;
        }
        Some((answers, (self.live)().await))
    }
}

/// Gives `reply` to the ask this node holds, if it holds it.
async fn take(
    broker: &PermissionBroker,
    questions: &QuestionBroker,
    reply: AskRequest,
) -> AskOutcome {
    let done = |held: bool| {
        if held {
            AskOutcome::Done
        } else {
            AskOutcome::Unknown
        }
    };
    match reply {
        AskRequest::Permission { id, reply, message } => {
            done(broker.reply(&id, reply, message).await)
        }
        AskRequest::Answer { id, answers } => match questions.reply(&id, answers) {
            Ok(held) => done(held),
            Err(error) => AskOutcome::Refused { error },
        },
        AskRequest::Dismiss { id } => done(questions.reject(&id)),
        AskRequest::List => AskOutcome::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(nodes: &[&str]) -> Option<Vec<String>> {
        Some(nodes.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn the_asking_nodes_own_answer_does_not_complete_a_request() {
        // The asking node may not be listed yet (its lease is written as it joins): its own
        // answer, which may come first, must not stand in for another node's.
        let mut awaited = Awaited::new("node-b", live(&["node-a"]));
        assert!(!awaited.all_heard());
        awaited.heard("node-b".into());
        assert!(!awaited.all_heard(), "only node A's answer completes it");
        awaited.heard("node-a".into());
        assert!(awaited.all_heard());
    }

    #[test]
    fn a_request_waits_for_every_other_live_node_in_any_order() {
        let mut awaited = Awaited::new("node-a", live(&["node-a", "node-b", "node-c"]));
        awaited.heard("node-c".into());
        assert!(!awaited.all_heard());
        awaited.heard("node-c".into());
        assert!(!awaited.all_heard(), "the same node twice counts once");
        awaited.heard("node-b".into());
        assert!(awaited.all_heard());
        assert!(
            !awaited.is_other_live("node-d"),
            "a node without a live lease"
        );
        assert!(!awaited.is_other_live("node-a"), "the asking node itself");
    }

    #[test]
    fn alone_in_the_cluster_a_request_waits_for_nobody() {
        assert!(Awaited::new("node-a", live(&["node-a"])).all_heard());
        assert!(Awaited::new("node-a", live(&[])).all_heard());
    }

    #[test]
    fn without_the_live_nodes_the_first_other_answer_completes_a_request() {
        let mut awaited = Awaited::new("node-a", None);
        assert!(awaited.is_other_live("node-z"));
        assert!(!awaited.all_heard());
        awaited.heard("node-a".into());
        assert!(!awaited.all_heard(), "its own answer does not count");
        awaited.heard("node-z".into());
        assert!(awaited.all_heard());
    }

    #[test]
    fn an_answer_names_its_node_beside_the_outcome() {
        let answer = Answer {
            node: "node-a".into(),
            outcome: AskOutcome::Held {
                permissions: vec![],
                questions: vec![],
            },
        };
        let wire = serde_json::to_value(&answer).unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"node": "node-a", "outcome": "held", "permissions": [], "questions": []})
        );
        let back: Answer = serde_json::from_value(wire).unwrap();
        assert_eq!(back.outcome, answer.outcome);
    }
}
