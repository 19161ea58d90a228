//! The permission broker: evaluates asks, keeps the pending ones, and resolves them on reply.
//!
//! An ask is evaluated pattern by pattern against the session's rules and the approvals
//! collected from "always" replies (which come last and win). `deny` fails at once with the
//! relevant rules; `ask` publishes `permission.asked` and waits for a reply; `allow` moves on.
//! A plain reject also rejects the session's other pending asks; "always" approves the request's
//! `always` patterns and resolves the session's other pending asks they now allow.

use std::sync::Mutex;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use taskforce_agents::id::{MessageId, PermissionId, SessionId};
use taskforce_agents::permission::{
    Action, AskDecision, PermissionAsk, PermissionError, Rule, decide, evaluate, wildcard,
};
use tokio::sync::oneshot;

use crate::bus::{BusHandle, Event};

/// An answer to a permission ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PermissionReply {
    /// Allow this call only.
    Once,
    /// Allow this call and, from now on, the ask's `always` patterns.
    Always,
    /// Refuse the call.
    Reject,
}

/// The tool call behind an ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolRef {
    /// The assistant message that made the call.
    #[serde(rename = "messageID")]
    pub message_id: MessageId,
    /// The call id.
    #[serde(rename = "callID")]
    pub call_id: String,
}

/// A pending ask, in OpenCode's `PermissionRequest` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PermissionRequest {
    /// The request id.
    pub id: PermissionId,
    /// The asking session.
    #[serde(rename = "sessionID")]
    pub session_id: SessionId,
    /// The permission asked for.
    pub permission: String,
    /// The values asked about.
    pub patterns: Vec<String>,
    /// Details for the user.
    pub metadata: Map<String, Value>,
    /// What an "always" reply approves.
    pub always: Vec<String>,
    /// The tool call, when a tool asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolRef>,
}

struct Pending {
    request: PermissionRequest,
    ruleset: Vec<Rule>,
    done: oneshot::Sender<Result<(), PermissionError>>,
}

/// Pending asks and approvals of one runtime.
pub struct PermissionBroker {
    bus: BusHandle,
    pending: Mutex<IndexMap<PermissionId, Pending>>,
    approved: Mutex<Vec<Rule>>,
}

impl PermissionBroker {
    /// A broker publishing on `bus`.
    pub fn new(bus: BusHandle) -> Self {
        PermissionBroker {
            bus,
            pending: Mutex::default(),
            approved: Mutex::default(),
        }
    }

    /// Evaluates `ask` for `session` against `ruleset` and the approvals; waits on `ask` results.
    pub async fn ask(
        &self,
        session: &SessionId,
        tool: Option<ToolRef>,
        ask: PermissionAsk,
        ruleset: &[Rule],
    ) -> Result<(), PermissionError> {
        let approved = self.approved_rules();
        match decide(&ask, &[ruleset, &approved]) {
            AskDecision::Allow => Ok(()),
            // The model is shown the session's rules, not the user's approvals.
            AskDecision::Deny(_) => Err(PermissionError::Denied {
                rules: ruleset
                    .iter()
                    .filter(|r| wildcard::matches(&ask.permission, &r.permission))
                    .cloned()
                    .collect(),
            }),
            AskDecision::Ask => {
                let (done, wait) = oneshot::channel();
                let request = PermissionRequest {
                    id: PermissionId::new(),
                    session_id: session.clone(),
                    permission: ask.permission.clone(),
                    patterns: ask.patterns.clone(),
                    metadata: ask.metadata.clone(),
                    always: ask.always.clone(),
                    tool,
                };
                self.lock_pending().insert(
                    request.id.clone(),
                    Pending {
                        request: request.clone(),
                        ruleset: ruleset.to_vec(),
                        done,
                    },
                );
                self.bus.publish(Event::PermissionAsked(request));
                // A dropped sender (the broker went away) counts as a rejection.
                wait.await.unwrap_or(Err(PermissionError::Rejected))
            }
        }
    }

    /// Answers a pending ask; returns false when no such ask is pending.
    pub fn reply(
        &self,
        id: &PermissionId,
        reply: PermissionReply,
        message: Option<String>,
    ) -> bool {
        let mut pending = self.lock_pending();
        let Some(entry) = pending.shift_remove(id) else {
            return false;
        };
        let session = entry.request.session_id.clone();
        self.replied(&entry.request, reply);
        match reply {
            PermissionReply::Once => {
                let _ = entry.done.send(Ok(()));
            }
            PermissionReply::Reject => {
                let error = match message.filter(|m| !m.trim().is_empty()) {
                    Some(m) => PermissionError::Corrected(m),
                    None => PermissionError::Rejected,
                };
                let _ = entry.done.send(Err(error));
                let others: Vec<PermissionId> = pending
                    .iter()
                    .filter(|(_, p)| p.request.session_id == session)
                    .map(|(id, _)| id.clone())
                    .collect();
                for other in others {
                    if let Some(p) = pending.shift_remove(&other) {
                        self.replied(&p.request, PermissionReply::Reject);
                        let _ = p.done.send(Err(PermissionError::Rejected));
                    }
                }
            }
            PermissionReply::Always => {
                {
                    let mut approved = self.lock_approved();
                    for pattern in &entry.request.always {
                        approved.push(Rule::new(
                            entry.request.permission.clone(),
                            pattern.clone(),
                            Action::Allow,
                        ));
                    }
                }
                let _ = entry.done.send(Ok(()));
                let approved = self.approved_rules();
                let now_allowed: Vec<PermissionId> = pending
                    .iter()
                    .filter(|(_, p)| p.request.session_id == session)
                    .filter(|(_, p)| {
                        p.request.patterns.iter().all(|pat| {
                            evaluate(&p.request.permission, pat, &[&approved]).action
                                == Action::Allow
                        })
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                for other in now_allowed {
                    if let Some(p) = pending.shift_remove(&other) {
                        self.replied(&p.request, PermissionReply::Always);
                        let _ = p.done.send(Ok(()));
                    }
                }
            }
        }
        true
    }

    /// Every pending ask, oldest first.
    pub fn list(&self) -> Vec<PermissionRequest> {
        self.lock_pending()
            .values()
            .map(|p| p.request.clone())
            .collect()
    }

    /// Rejects every pending ask of `session` (its loop was cancelled).
    pub fn drop_session(&self, session: &SessionId) {
        let mut pending = self.lock_pending();
        let ids: Vec<PermissionId> = pending
            .iter()
            .filter(|(_, p)| &p.request.session_id == session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(p) = pending.shift_remove(&id) {
                self.replied(&p.request, PermissionReply::Reject);
                let _ = p.done.send(Err(PermissionError::Rejected));
            }
        }
    }

    /// The ruleset a pending ask was evaluated against.
    pub fn ruleset_of(&self, id: &PermissionId) -> Option<Vec<Rule>> {
        self.lock_pending().get(id).map(|p| p.ruleset.clone())
    }

    fn replied(&self, request: &PermissionRequest, reply: PermissionReply) {
        self.bus.publish(Event::PermissionReplied {
            session_id: request.session_id.clone(),
            request_id: request.id.clone(),
            reply,
        });
    }

    fn approved_rules(&self) -> Vec<Rule> {
        self.lock_approved().clone()
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, IndexMap<PermissionId, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_approved(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.approved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
