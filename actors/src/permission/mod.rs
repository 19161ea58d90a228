//! The permission broker: evaluates asks, keeps the pending ones, and resolves them on reply.
//!
//! An ask is evaluated pattern by pattern against the session's rules, then against the
//! approvals collected from "always" replies, and the strictest pattern decides: a `deny`
//! anywhere fails with the relevant rules; otherwise a pattern the rules `ask` about and no
//! approval allows (or an ask that forces the question) publishes `permission.asked` and waits
//! for a reply; all allowed is allowed. A plain reject also rejects the session's other pending asks;
//! "always" approves the request's `always` patterns and resolves the session's other pending
//! asks they now allow.
//!
//! Beyond OpenCode: approvals belong to the project and are kept in the store, so they survive
//! a restart (OpenCode loads them but never writes them back). Because an approval may be much
//! older than the configuration, an approval only answers what would otherwise be asked: a
//! rule that denies still denies (in OpenCode approvals come last and win over everything).
//! Requests also say where they come from (`rootSessionID` and the agents' `path`), so that a
//! client watching a root session can answer the asks of its subagents.

pub use taskforce_agents::permission::{AskOrigin, PermissionReply, PermissionRequest, ToolRef};

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use indexmap::IndexMap;
use serde_json::Map;
use taskforce_agents::id::{PermissionId, SessionId, now_ms};
use taskforce_agents::permission::{
    Action, AskDecision, Layers, PermissionAsk, PermissionError, Rule, decide_with_approvals,
};
use tokio::sync::oneshot;

use crate::bus::{BusHandle, Event};
use crate::store::{Approval, Store, StoreError};

struct Pending {
    request: PermissionRequest,
    ruleset: Layers,
    /// The ask forces the question (see [`PermissionAsk::force_ask`]).
    force_ask: bool,
    done: oneshot::Sender<Result<(), PermissionError>>,
}

impl Pending {
    /// The ask again, for deciding it anew against new approvals.
    fn ask(&self) -> PermissionAsk {
        PermissionAsk {
            permission: self.request.permission.clone(),
            patterns: self.request.patterns.clone(),
            always: Vec::new(),
            force_ask: self.force_ask,
            metadata: Map::new(),
        }
    }
}

/// Where approvals are kept: a store and the project they belong to.
struct Keeper {
    store: Arc<dyn Store>,
    project: String,
}

/// Pending asks and approvals of one runtime.
pub struct PermissionBroker {
    bus: BusHandle,
    pending: Mutex<IndexMap<PermissionId, Pending>>,
    /// How many asks are pending, as of the last release of `pending`: a cancelled session
    /// with nothing pending (nearly all of them) is passed over without taking the lock.
    waiting: AtomicUsize,
    approved: Mutex<Vec<Rule>>,
    keeper: Option<Keeper>,
}

impl PermissionBroker {
    /// A broker publishing on `bus` whose approvals last as long as it does.
    pub fn new(bus: BusHandle) -> Self {
        PermissionBroker {
            bus,
            pending: Mutex::default(),
            waiting: AtomicUsize::new(0),
            approved: Mutex::default(),
            keeper: None,
        }
    }

    /// A broker publishing on `bus` that starts with `project`'s stored approvals and stores
    /// the new ones there.
    pub async fn load(
        bus: BusHandle,
        store: Arc<dyn Store>,
        project: String,
    ) -> Result<Self, StoreError> {
        let approved = store
            .approvals(&project)
            .await?
            .into_iter()
            .map(|a| Rule::new(a.permission, a.pattern, Action::Allow))
            .collect();
        Ok(PermissionBroker {
            bus,
            pending: Mutex::default(),
            waiting: AtomicUsize::new(0),
            approved: Mutex::new(approved),
            keeper: Some(Keeper { store, project }),
        })
    }

    /// Evaluates `ask` from `origin` against `ruleset` (one layer: a session with no caller
    /// above it) and the approvals; waits on `ask` results.
    pub async fn ask(
        &self,
        origin: &AskOrigin,
        tool: Option<ToolRef>,
        ask: PermissionAsk,
        ruleset: &[Rule],
    ) -> Result<(), PermissionError> {
        let layers = Layers::single(ruleset.to_vec());
        self.ask_from(async { origin.clone() }, tool, ask, &layers, || ())
            .await
    }

    /// Like [`ask`](Self::ask), against rules in layers (a child session's own and its
    /// callers': the strictest decides); `origin` is only awaited when the user must be asked
    /// (it may read the store; most asks are allowed or denied by the rules alone), and what
    /// `waiting` makes then is held until the reply comes (the asking session's idle clock).
    pub async fn ask_from<W>(
        &self,
        origin: impl Future<Output = AskOrigin>,
        tool: Option<ToolRef>,
        ask: PermissionAsk,
        ruleset: &Layers,
        waiting: impl FnOnce() -> W,
    ) -> Result<(), PermissionError> {
        let approved = self.approved_rules();
        match decide_with_approvals(&ask, ruleset, &approved) {
            AskDecision::Allow => Ok(()),
            AskDecision::Deny(rules) => Err(PermissionError::Denied { rules }),
            AskDecision::Ask => {
                let force_ask = ask.force_ask;
                let origin = origin.await;
                let (done, wait) = oneshot::channel();
                let request = PermissionRequest {
                    id: PermissionId::new(),
                    session_id: origin.session_id.clone(),
                    permission: ask.permission,
                    patterns: ask.patterns,
                    metadata: ask.metadata,
                    always: ask.always,
                    tool,
                    root_session_id: origin.root_session_id.clone(),
                    path: origin.path.clone(),
                };
                self.lock_pending().insert(
                    request.id.clone(),
                    Pending {
                        request: request.clone(),
                        ruleset: ruleset.clone(),
                        force_ask,
                        done,
                    },
                );
                let _waiting = waiting();
                self.bus.publish(Event::PermissionAsked(Box::new(request)));
                // A dropped sender (the broker went away) counts as a rejection.
                wait.await.unwrap_or(Err(PermissionError::Rejected))
            }
        }
    }

    /// What `ruleset` and the approvals say about `ask`, without asking anyone.
    pub fn check(&self, ask: &PermissionAsk, ruleset: &Layers) -> AskDecision {
        decide_with_approvals(ask, ruleset, &self.lock_approved())
    }

    /// Answers a pending ask; returns false (and publishes nothing) when no such ask is pending.
    /// An "always" reply returns once its approvals are stored; a failed write is logged and
    /// the approvals still hold for this runtime.
    pub async fn reply(
        &self,
        id: &PermissionId,
        reply: PermissionReply,
        message: Option<String>,
    ) -> bool {
        let Some(approvals) = self.resolve(id, reply, message) else {
            return false;
        };
        if let Some(keeper) = &self.keeper
            && !approvals.is_empty()
        {
            let (store, project) = (keeper.store.clone(), keeper.project.clone());
            // Spawned, so the write lands even if the caller stops waiting for it.
            let write =
                tokio::spawn(async move { store.add_approvals(&project, &approvals).await });
            match write.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "an approval was not stored"),
                Err(error) => tracing::warn!(%error, "storing an approval failed"),
            }
        }
        true
    }

    /// Applies a reply; `None` when the ask is not pending, else the approvals to store.
    fn resolve(
        &self,
        id: &PermissionId,
        reply: PermissionReply,
        message: Option<String>,
    ) -> Option<Vec<Approval>> {
        let mut pending = self.lock_pending();
        let entry = pending.shift_remove(id)?;
        let session = entry.request.session_id.clone();
        self.replied(&entry.request, reply);
        let mut approvals = Vec::new();
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
                let others = ids_where(&pending, |p| p.request.session_id == session);
                for other in others {
                    if let Some(p) = pending.shift_remove(&other) {
                        self.replied(&p.request, PermissionReply::Reject);
                        let _ = p.done.send(Err(PermissionError::Rejected));
                    }
                }
            }
            PermissionReply::Always => {
                approvals = self.approve(&entry.request);
                let _ = entry.done.send(Ok(()));
                let approved = self.approved_rules();
                let now_allowed = ids_where(&pending, |p| {
                    p.request.session_id == session
                        && decide_with_approvals(&p.ask(), &p.ruleset, &approved)
                            == AskDecision::Allow
                });
                for other in now_allowed {
                    if let Some(p) = pending.shift_remove(&other) {
                        self.replied(&p.request, PermissionReply::Always);
                        let _ = p.done.send(Ok(()));
                    }
                }
            }
        }
        Some(approvals)
    }

    /// Adds the request's `always` patterns to the approvals; returns the ones that are new.
    fn approve(&self, request: &PermissionRequest) -> Vec<Approval> {
        let mut approved = self.lock_approved();
        let mut added = Vec::new();
        let created = now_ms();
        for pattern in &request.always {
            let rule = Rule::new(request.permission.clone(), pattern.clone(), Action::Allow);
            if !approved.contains(&rule) {
                approved.push(rule);
                added.push(Approval {
                    permission: request.permission.clone(),
                    pattern: pattern.clone(),
                    created,
                });
            }
        }
        added
    }

    /// Every pending ask, oldest first.
    pub fn list(&self) -> Vec<PermissionRequest> {
        self.lock_pending()
            .values()
            .map(|p| p.request.clone())
            .collect()
    }

    /// Every approval from "always" replies (stored ones included), oldest first.
    pub fn approvals(&self) -> Vec<Rule> {
        self.approved_rules()
    }

    /// Rejects every pending ask of `session` (its loop was cancelled).
    pub fn drop_session(&self, session: &SessionId) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut pending = self.lock_pending();
        for id in ids_where(&pending, |p| &p.request.session_id == session) {
            if let Some(p) = pending.shift_remove(&id) {
                self.replied(&p.request, PermissionReply::Reject);
                let _ = p.done.send(Err(PermissionError::Rejected));
            }
        }
    }

    /// The rules a pending ask was evaluated against.
    pub fn ruleset_of(&self, id: &PermissionId) -> Option<Layers> {
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

    fn lock_pending(&self) -> PendingGuard<'_> {
        PendingGuard {
            map: self.pending.lock().unwrap_or_else(PoisonError::into_inner),
            waiting: &self.waiting,
        }
    }

    fn lock_approved(&self) -> MutexGuard<'_, Vec<Rule>> {
        self.approved.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The ids of the pending asks passing `keep`, oldest first.
fn ids_where(
    pending: &IndexMap<PermissionId, Pending>,
    keep: impl Fn(&Pending) -> bool,
) -> Vec<PermissionId> {
    pending
        .iter()
        .filter(|(_, p)| keep(p))
        .map(|(id, _)| id.clone())
        .collect()
}

/// The locked pending asks; their count is published when the lock is released.
struct PendingGuard<'a> {
    map: MutexGuard<'a, IndexMap<PermissionId, Pending>>,
    waiting: &'a AtomicUsize,
}

impl Deref for PendingGuard<'_> {
    type Target = IndexMap<PermissionId, Pending>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl DerefMut for PendingGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.map
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.waiting.store(self.map.len(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
