//! Delivering a finished background child's result into its parent, now or when the next
//! runtime starts.

use std::sync::Arc;

use actix::Addr;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Session};
use taskforce_agents::tool::background::ChildStatus;

use super::{Ended, record_end};
use crate::RuntimeError;
use crate::core::Core;
use crate::owner::is_running;
use crate::session::{Exclusive, Job, PartInput, Prompt, PromptInput, Reply, Seed, SessionActor};
use crate::store::{BackgroundTask, MessageWithParts};
use crate::subagent::Subagents;
use crate::subagent::guard::is_within;
use crate::supervisor::{Activate, Live, Supervisor};

impl Subagents {
    /// Delivers every finished, undelivered background result in the store (at runtime start),
    /// or only those of `within`'s tree. A child still recorded as running whose runtime is
    /// gone (it crashed or stopped first) is recorded as interrupted, with its output so far,
    /// and that result is delivered; children of live runtimes are left to them. Returns once
    /// the records are sorted; deliveries go on.
    pub(crate) async fn deliver_pending(self: &Arc<Self>, within: Option<&SessionId>) {
        let core = &self.core;
        let pending = match core.store.undelivered_background().await {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!("reading the undelivered background results failed: {e}");
                return;
            }
        };
        for mut record in pending {
            if let Some(root) = within
                && !is_within(&*core.store, &record.parent_id, root)
                    .await
                    .unwrap_or(false)
            {
                continue;
            }
            let unfinished = matches!(record.status, ChildStatus::Running | ChildStatus::Queued);
            if !take_over(core, &mut record, unfinished).await {
                continue;
            }
            if unfinished {
                let stopped = Ended::plain(Err(RuntimeError::Stopped));
                let home = core.paths.home.as_deref();
                record = record_end(&*core.store, record, stopped, home).await;
            }
            let me = self.clone();
            tokio::spawn(async move { me.deliver(record).await });
        }
    }

    /// Sends `record`'s result into its parent and marks it delivered once it is stored there.
    pub(super) async fn deliver(&self, mut record: BackgroundTask) {
        let parent = record.parent_id.clone();
        let Some(text) = record.result.clone() else {
            return;
        };
        match self.try_deliver(&record, text).await {
            Ok(true) => {
                record.delivered = true;
                if let Err(e) = self.core.store.put_background(&record).await {
                    tracing::warn!(session = %parent, "marking a background result delivered failed: {e}");
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(session = %parent, child = %record.child_id, "delivering a background result failed (kept for the next start): {e}");
            }
        }
    }

    /// Sends the delivery message and waits until the parent has handled it; answers whether
    /// the message is now in the parent's history.
    async fn try_deliver(
        &self,
        record: &BackgroundTask,
        text: String,
    ) -> Result<bool, RuntimeError> {
        let id = &record.parent_id;
        // One delivery into a parent at a time: a result stored without a reply must not find
        // the parent busy storing another one and fall back to starting a turn.
        let lock = self.deliveries.entry(id.clone()).or_default().clone();
        let delivered = {
            let _one_at_a_time = lock.lock().await;
            deliver_now(&self.core, &self.supervisor, record, text).await
        };
        drop(lock);
        self.deliveries
            .remove_if(id, |_, lock| Arc::strong_count(lock) == 1);
        delivered
    }
}

/// Whether this runtime delivers `record`. Its own: once the child ended (a running one is
/// still its business). A live runtime's: never, that runtime delivers them. A record of a
/// runtime that is gone is first taken over in the store, so that of runtimes starting at once
/// only one records and delivers it.
async fn take_over(core: &Core, record: &mut BackgroundTask, unfinished: bool) -> bool {
    let me = &core.owner.id;
    match record.owner.as_deref() {
        Some(owner) if owner == me => return !unfinished,
        Some(owner) if is_running(&*core.store, &core.paths.data_dir, owner).await => {
            return false;
        }
        _ => {}
    }
    let claimed = core
        .store
        .claim_background(&record.child_id, record.owner.as_deref(), me)
        .await;
    match claimed {
        Ok(true) => {
            record.owner = Some(me.clone());
            true
        }
        Ok(false) => false,
        Err(e) => {
            tracing::warn!(child = %record.child_id, "taking over a background result failed: {e}");
            false
        }
    }
}

/// [`try_deliver`] once the parent's delivery lock is held.
async fn deliver_now(
    core: &Core,
    supervisor: &Addr<Supervisor>,
    record: &BackgroundTask,
    text: String,
) -> Result<bool, RuntimeError> {
    let id = &record.parent_id;
    // A runtime that is stopping leaves the result to the next one.
    if core.stopping.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(false);
    }
    // A deleted parent takes its records with it; nothing to deliver to.
    let Some(session) = core.store.session(id).await? else {
        return Ok(false);
    };
    let history = core.store.messages(id).await?;
    if holds(&history, &text) {
        return Ok(true);
    }
    let tools = history.iter().rev().find_map(|m| match &*m.info {
        Message::User(u) => Some(u.tools.clone()),
        Message::Assistant(_) => None,
    });
    let input = PromptInput {
        parts: vec![PartInput::Text {
            text: text.clone(),
            synthetic: true,
        }],
        agent: core.registry.get(&record.agent).map(|a| a.name.clone()),
        model: Some(record.model.clone()),
        tools: tools.flatten(),
        ..Default::default()
    };
    let reply = send(
        supervisor,
        &session,
        input,
        record.status == ChildStatus::Cancelled,
    )
    .await?;
    let _ = reply.await;
    Ok(holds(&core.store.messages(id).await?, &text))
}

/// Whether a user message of `history` carries the delivery `text`.
fn holds(history: &[MessageWithParts], text: &str) -> bool {
    history
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .flat_map(|m| m.parts.iter())
        .any(|p| p.as_text().is_some_and(|t| t.text == text))
}

/// Sends `input` to `session`'s actor (started from the store if needed): as a prompt, or, when
/// `quiet` and the session is idle, as a message stored without a reply.
async fn send(
    supervisor: &Addr<Supervisor>,
    session: &Session,
    input: PromptInput,
    quiet: bool,
) -> Result<Reply, RuntimeError> {
    for _ in 0..2 {
        let addr = actor_of(supervisor, session).await?;
        if quiet {
            match addr.send(Exclusive(Job::Message(input.clone()))).await {
                Ok(Err(RuntimeError::Busy(_))) => {}
                Ok(result) => return result,
                Err(_) => continue,
            }
        }
        if let Ok(reply) = addr
            .send(Prompt {
                input: input.clone(),
            })
            .await
        {
            return reply;
        }
    }
    Err(RuntimeError::Crashed(session.id.to_string()))
}

/// The live actor of `session`, else a new one.
async fn actor_of(
    supervisor: &Addr<Supervisor>,
    session: &Session,
) -> Result<Addr<SessionActor>, RuntimeError> {
    let id = session.id.clone();
    if let Some(addr) = supervisor
        .send(Live { id: id.clone() })
        .await
        .map_err(|_| RuntimeError::Stopped)?
    {
        return Ok(addr);
    }
    supervisor
        .send(Activate {
            id,
            parent: None,
            seed: Some(Seed {
                session: session.clone(),
                empty: false,
                unsaved: false,
            }),
            near: None,
        })
        .await
        .map_err(|_| RuntimeError::Stopped)
}
