//! Reporting on and cancelling a session's own background children (`task_status`,
//! `task_cancel`).

use actix::Addr;
use futures::StreamExt;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Message;
use taskforce_agents::tool::ToolError;
use taskforce_agents::tool::background::{ChildReport, ChildStatus};

use super::CANCEL_WAIT;
use crate::RuntimeError;
use crate::bus::{BusItem, Event, Filter};
use crate::session::IsBusy;
use crate::store::{BackgroundTask, MessageWithParts};
use crate::subagent::Subagents;
use crate::subagent::answer::usage_of;
use crate::subagent::call::{ABORTED, SubagentDelegate, failed};
use crate::subagent::guard::is_within;
use crate::supervisor::{CancelTree, Live, Supervisor};

impl SubagentDelegate {
    /// Where `child` stands, if this session owns it.
    pub(in crate::subagent) async fn child_report(
        &self,
        child: &SessionId,
    ) -> Result<ChildReport, ToolError> {
        let record = self.owned(child).await?;
        report(&self.subagents, child, record.as_ref()).await
    }

    /// Cancels `child`'s subtree, if this session owns it; reports once it has stopped (or after
    /// a short wait).
    pub(in crate::subagent) async fn cancel_child(
        &self,
        child: &SessionId,
    ) -> Result<ChildReport, ToolError> {
        let record = self.owned(child).await?;
        let mut events = self.core.bus.subscribe(Filter::Session(child.clone()));
        let busy = is_busy(&self.subagents.supervisor, child).await;
        let queued = self.subagents.queued.contains_key(child);
        let unrecorded = self.subagents.unrecorded.get(child).map(|r| r.clone());
        self.subagents
            .supervisor
            .send(CancelTree { id: child.clone() })
            .await
            .map_err(|_| failed(RuntimeError::Stopped))?;
        if queued && let Some(mut unrecorded) = unrecorded {
            // It never started: its waiting task records the cancelled end right away (and
            // closes the channel once it has).
            let _ = tokio::time::timeout(CANCEL_WAIT, unrecorded.wait_for(|_| false)).await;
            if let Ok(Some(record)) = self.core.store.background(child).await {
                return report(&self.subagents, child, Some(&record)).await;
            }
        }
        if busy {
            let idle = async {
                while let Some(item) = events.next().await {
                    if let BusItem::Event(e) = item
                        && matches!(&e.event, Event::SessionIdle { session_id } if session_id == child)
                    {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(CANCEL_WAIT, idle).await;
        }
        report(&self.subagents, child, record.as_ref()).await
    }

    /// The background record of `child`, after checking that the calling session is its parent
    /// or an ancestor of it; a clear error otherwise.
    async fn owned(&self, child: &SessionId) -> Result<Option<BackgroundTask>, ToolError> {
        let store = &self.core.store;
        let me = &self.parent.id;
        let record = store.background(child).await.map_err(failed)?;
        let parent = match &record {
            Some(r) => Some(r.parent_id.clone()),
            None => match store.session(child).await.map_err(failed)? {
                Some(s) => s.parent_id,
                None => {
                    return Err(ToolError::Failed(format!(
                        "session {child} does not exist; pass the session_id a task call returned"
                    )));
                }
            },
        };
        if let Some(parent) = parent
            && is_within(&*self.core.store, &parent, me)
                .await
                .map_err(failed)?
        {
            return Ok(record);
        }
        Err(ToolError::Failed(format!(
            "session {child} was not started by this session (it belongs to another session tree or branch); only this session's own subagents can be inspected or cancelled"
        )))
    }
}

/// Whether a background child started in `root`'s subtree (by `root` or a descendant) has
/// not delivered its result yet (its delivery includes the parent's turn it starts).
impl Subagents {
    pub(in crate::subagent) async fn background_pending(&self, root: &SessionId) -> bool {
        if self.background.is_empty() {
            return false;
        }
        let parents: Vec<SessionId> = self.background.iter().map(|e| e.value().clone()).collect();
        for parent in parents {
            if is_within(&*self.core.store, &parent, root)
                .await
                .unwrap_or(false)
            {
                return true;
            }
        }
        false
    }
}

/// Whether `id`'s actor is live and running its loop.
async fn is_busy(supervisor: &Addr<Supervisor>, id: &SessionId) -> bool {
    match supervisor.send(Live { id: id.clone() }).await {
        Ok(Some(addr)) => addr.send(IsBusy).await.unwrap_or(false),
        _ => false,
    }
}

/// The report on `child`: running while its loop runs, else how its last run ended.
async fn report(
    subagents: &Subagents,
    child: &SessionId,
    record: Option<&BackgroundTask>,
) -> Result<ChildReport, ToolError> {
    let busy = is_busy(&subagents.supervisor, child).await;
    let history = subagents.core.store.messages(child).await.map_err(failed)?;
    let since = record.map_or(0, |r| r.started);
    let answers: Vec<&MessageWithParts> = history
        .iter()
        .filter(|m| m.is_answer_since(since))
        .collect();
    let (ended, error) = answers
        .last()
        .map_or((ChildStatus::Completed, None), |m| status_of(&m.info));
    let status = if subagents.queued.contains_key(child) {
        ChildStatus::Queued
    } else if busy {
        ChildStatus::Running
    } else {
        match record {
            Some(r) if r.status != ChildStatus::Running => r.status,
            // Nothing answered yet and the run is recorded as running: it is about to start.
            Some(_) if answers.is_empty() => ChildStatus::Running,
            _ => ended,
        }
    };
    Ok(ChildReport {
        session_id: child.clone(),
        status,
        output: last_text(None, &answers),
        error: (status == ChildStatus::Error).then_some(error).flatten(),
        usage: usage_of(&answers),
    })
}

/// How a run that answered `message` ended, with the error message when it failed.
pub(super) fn status_of(message: &Message) -> (ChildStatus, Option<String>) {
    match message {
        Message::Assistant(a) => match &a.error {
            None => (ChildStatus::Completed, None),
            Some(e) if e.name() == ABORTED => (ChildStatus::Cancelled, None),
            Some(e) => (
                ChildStatus::Error,
                Some(e.message().unwrap_or(e.name()).to_string()),
            ),
        },
        Message::User(_) => (ChildStatus::Completed, None),
    }
}

/// The last text of `message`, else of the newest of `answers` that has one.
pub(super) fn last_text(
    message: Option<&MessageWithParts>,
    answers: &[&MessageWithParts],
) -> String {
    message
        .into_iter()
        .chain(answers.iter().rev().copied())
        .find_map(|m| {
            m.parts
                .iter()
                .rev()
                .find_map(|p| p.as_text().map(|t| t.text.clone()))
        })
        .unwrap_or_default()
}
