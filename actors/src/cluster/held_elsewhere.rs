//! The asks other nodes hold, as this node learns of them from their events: so that when a
//! node dies, the asks it left open can be closed for every client (a client shows an ask
//! until it hears that it was answered).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use taskforce_agents::id::{PermissionId, QuestionId, SessionId};
use taskforce_agents::permission::{PermissionReply, PermissionRequest};
use taskforce_agents::question::QuestionRequest;

use crate::bus::Event;

/// One open ask of another node.
#[derive(Debug, Clone, PartialEq)]
enum Ask {
    Permission(PermissionId),
    Question(QuestionId),
}

/// Who holds an open ask, and for which session.
#[derive(Debug, Clone)]
struct Held {
    node: String,
    session: SessionId,
    ask: Ask,
}

/// Every open ask of the other nodes, by ask id.
#[derive(Debug, Default)]
pub(crate) struct HeldElsewhere {
    asks: Mutex<HashMap<String, Held>>,
}

impl HeldElsewhere {
    /// Notes what `event`, published by `node`, says of an ask: raised, answered or dismissed.
    pub(crate) fn observe(&self, node: &str, event: &Event) {
        let mut asks = self.asks.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Event::PermissionAsked(request) => {
                asks.insert(request.id.to_string(), permission(node, request));
            }
            Event::QuestionAsked(request) => {
                asks.insert(request.id.to_string(), question(node, request));
            }
            Event::PermissionReplied { request_id, .. } => {
                asks.remove(request_id.as_str());
            }
            Event::QuestionReplied { request_id, .. }
            | Event::QuestionRejected { request_id, .. } => {
                asks.remove(request_id.as_str());
            }
            _ => {}
        }
    }

    /// Notes the asks `node` said it holds when asked for them.
    pub(crate) fn seed(
        &self,
        node: &str,
        permissions: &[PermissionRequest],
        questions: &[QuestionRequest],
    ) {
        let mut asks = self.asks.lock().unwrap_or_else(PoisonError::into_inner);
        for request in permissions {
            asks.insert(request.id.to_string(), permission(node, request));
        }
        for request in questions {
            asks.insert(request.id.to_string(), question(node, request));
        }
    }

    /// Forgets the asks of `node`, gone, and answers the events that close them for clients:
    /// its permission asks rejected, its questions dismissed (as when a run is cancelled).
    pub(crate) fn forget(&self, node: &str) -> Vec<Event> {
        let mut asks = self.asks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut gone: Vec<Held> = Vec::new();
        asks.retain(|_, held| {
            if held.node == node {
                gone.push(held.clone());
                false
            } else {
                true
            }
        });
        gone.into_iter()
            .map(|held| match held.ask {
                Ask::Permission(request_id) => Event::PermissionReplied {
                    session_id: held.session,
                    request_id,
                    reply: PermissionReply::Reject,
                },
                Ask::Question(request_id) => Event::QuestionRejected {
                    session_id: held.session,
                    request_id,
                },
            })
            .collect()
    }
}

fn permission(node: &str, request: &PermissionRequest) -> Held {
    Held {
        node: node.to_string(),
        session: request.session_id.clone(),
        ask: Ask::Permission(request.id.clone()),
    }
}

fn question(node: &str, request: &QuestionRequest) -> Held {
    Held {
        node: node.to_string(),
        session: request.session_id.clone(),
        ask: Ask::Question(request.id.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(id: &str, session: &str) -> Event {
        let request: QuestionRequest = serde_json::from_value(serde_json::json!({
            "id": id, "sessionID": session, "questions": [],
            "rootSessionID": session, "path": []
        }))
        .unwrap();
        Event::QuestionAsked(Box::new(request))
    }

    #[test]
    fn a_lost_nodes_open_asks_are_closed_and_the_others_kept() {
        let held = HeldElsewhere::default();
        let (s1, s2) = ("ses_aaa", "ses_bbb");
        held.observe("node-a", &asked("que_1", s1));
        held.observe("node-a", &asked("que_2", s1));
        held.observe("node-b", &asked("que_3", s2));
        // Answered on node A: no longer open.
        held.observe(
            "node-a",
            &Event::QuestionReplied {
                session_id: s1.parse().unwrap(),
                request_id: "que_2".parse().unwrap(),
                answers: vec![],
            },
        );
        let closing = held.forget("node-a");
        assert_eq!(
            closing,
            vec![Event::QuestionRejected {
                session_id: s1.parse().unwrap(),
                request_id: "que_1".parse().unwrap(),
            }]
        );
        assert!(held.forget("node-a").is_empty(), "closed once");
        assert_eq!(held.forget("node-b").len(), 1, "node B's ask was kept");
    }
}
