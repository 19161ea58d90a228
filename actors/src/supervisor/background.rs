//! Background subagents: starting a child without waiting for it, reporting on and cancelling
//! a session's own children, and delivering a finished child's result into its parent.
//!
//! A background child of a session that itself runs for a task call is waited for by that call
//! (`background_pending`): the call answers once every such result has been delivered and the
//! turns it started have ended, so no result ends up in a session nobody reads.
//!
//! Delivery: when a background child ends, its `<task_result …>` text is stored in its record
//! (`background_task`, not yet delivered) and then sent to the parent's actor as a `Prompt` with a
//! synthetic text part (its message gets its id when the parent's loop stores it, so the history
//! stays in order). An idle parent starts a turn on it; a busy one picks it up in its running
//! loop. A *cancelled* result never starts a turn by itself (the user or the model stopped that
//! work): to an idle parent it is stored without a reply, to a busy one it is queued like any
//! other. The record is marked delivered once the text is in the parent's history; records left
//! undelivered (the runtime stopped first) are delivered when the next runtime starts, and a
//! result whose text is already in the parent's history is not delivered twice. A record still
//! `running` when a runtime starts names the runtime running it (`owner`): if that runtime is
//! alive (it holds its lock file, see `runtime::owner`) the record is left to it; if it is gone
//! (crashed, killed, stopped) the child is recorded as interrupted (`status="error"`, with its
//! output so far) and that result is delivered like any other. Results a live runtime has not
//! delivered yet are left to it too; a record of a runtime that is gone is taken over in the
//! store first (`claim_background`), so that of two runtimes starting at once only one records
//! and delivers it.

use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use futures::StreamExt;
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::{SessionId, now_ms};
use taskforce_agents::model::{Message, Session};
use taskforce_agents::tool::background::{ChildReport, ChildStatus, task_result_text};
use taskforce_agents::tool::{SubagentRequest, TimeoutReason, ToolContext, ToolError};
use tokio_util::sync::CancellationToken;

use super::delegate::{ABORTED, SupervisorDelegate, failed, start_child, usage_of};
use super::timeout::{self, Activity, ActivityFilter, Listed, RunLimits};
use super::{Activate, Adopt, CancelTree, Live, is_within, limits, session_depth};
use crate::RuntimeError;
use crate::bus::{BusItem, Event, Filter};
use crate::core::Core;
use crate::runtime::is_alive;
use crate::session::{
    Exclusive, IsBusy, Job, PartInput, Prompt, PromptInput, Reply, Seed, SessionActor,
};
use crate::store::{BackgroundTask, MessageWithParts};

/// How long `task_cancel` waits for the child to record its end.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

impl SupervisorDelegate {
    /// Queues the child of `request` for a running slot and returns its id at once; a spawned
    /// task waits for the slot (cancellable meanwhile), runs the child under the run-time
    /// limits, and delivers the result. A tree that is full fails the call at once.
    pub(super) async fn start_background_child(
        &self,
        ctx: &ToolContext,
        mut request: SubagentRequest,
    ) -> Result<SessionId, ToolError> {
        let parent = self.parent.clone();
        let (child, new, nests) = self.prepare_child(&ctx.agent, &request).await?;
        let root = self.root_of(&parent).await?;
        let reservation = limits::reserve(&self.core, &root, new).await?;
        // Its turn for a slot is taken now, so background calls start in the order made.
        let waiting = self.core.limits.enqueue(&parent.id, &child.id);
        self.core.bus.register_parent(&child.id, &parent.id);
        let record = BackgroundTask {
            child_id: child.id.clone(),
            parent_id: parent.id.clone(),
            agent: ctx.agent.name.clone(),
            model: ctx.model.clone(),
            started: now_ms(),
            status: ChildStatus::Running,
            result: None,
            delivered: false,
            owner: Some(self.core.owner.id.clone()),
        };
        self.core
            .store
            .put_background(&record)
            .await
            .map_err(failed)?;
        if let Some(reservation) = reservation {
            reservation.keep();
        }
        // In the live tree and cancellable while it waits: cancelling the parent's tree (or
        // `task_cancel`) ends it before it starts.
        let cancel = CancellationToken::new();
        self.core.queued.insert(child.id.clone(), cancel.clone());
        let adopted = self
            .supervisor
            .send(Adopt {
                id: child.id.clone(),
                parent: parent.id.clone(),
            })
            .await;
        if adopted.is_err() {
            self.core.queued.remove(&child.id);
            return Err(ToolError::Failed("the runtime has stopped".into()));
        }
        let input = self.child_input(&mut request, nests, new);
        let run = BackgroundRun {
            core: self.core.clone(),
            supervisor: self.supervisor.clone(),
            child: child.clone(),
            new,
            input,
            limits: RunLimits::new(&self.core.config.subagent, request.timeout),
            home: ctx.home.clone(),
        };
        let (recorded, unrecorded) = tokio::sync::watch::channel(());
        self.core.unrecorded.insert(child.id.clone(), unrecorded);
        self.core
            .background
            .insert(child.id.clone(), parent.id.clone());
        tokio::spawn(async move {
            let slot = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                slot = waiting.admitted() => Some(slot),
            };
            let ended = match slot {
                Some(slot) => {
                    let ended = run.run(&cancel).await;
                    drop(slot);
                    ended
                }
                None => Ended::plain(Err(RuntimeError::Cancelled)),
            };
            run.core.queued.remove(&run.child.id);
            let record = record_end(&run.core, record, ended, run.home.as_deref()).await;
            run.core.unrecorded.remove(&run.child.id);
            drop(recorded);
            deliver(&run.core, record).await;
            run.core.background.remove(&run.child.id);
        });
        Ok(child.id)
    }

    /// The child session to run `request` in, whether it is new, and whether it may delegate.
    async fn prepare_child(
        &self,
        caller: &AgentInfo,
        request: &SubagentRequest,
    ) -> Result<(Session, bool, bool), ToolError> {
        let depth = session_depth(&self.core, &self.parent).await + 1;
        let limits = &self.core.config.subagent;
        let nests = limits.enabled && depth < limits.max_depth;
        let (child, new) = self
            .child_session(&self.parent, caller, request, nests)
            .await?;
        Ok((child, new, nests))
    }

    /// Where `child` stands, if this session owns it.
    pub(super) async fn child_report(&self, child: &SessionId) -> Result<ChildReport, ToolError> {
        let record = self.owned(child).await?;
        report(&self.core, &self.supervisor, child, record.as_ref()).await
    }

    /// Cancels `child`'s subtree, if this session owns it; reports once it has stopped (or after
    /// a short wait).
    pub(super) async fn cancel_child(&self, child: &SessionId) -> Result<ChildReport, ToolError> {
        let record = self.owned(child).await?;
        let mut events = self.core.bus.subscribe(Filter::Session(child.clone()));
        let busy = is_busy(&self.supervisor, child).await;
        let queued = self.core.queued.contains_key(child);
        let unrecorded = self.core.unrecorded.get(child).map(|r| r.clone());
        self.supervisor
            .send(CancelTree { id: child.clone() })
            .await
            .map_err(|_| ToolError::Failed("the runtime has stopped".into()))?;
        if queued && let Some(mut unrecorded) = unrecorded {
            // It never started: its waiting task records the cancelled end right away (and
            // closes the channel once it has).
            let _ = tokio::time::timeout(CANCEL_WAIT, unrecorded.wait_for(|_| false)).await;
            if let Ok(Some(record)) = self.core.store.background(child).await {
                return report(&self.core, &self.supervisor, child, Some(&record)).await;
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
        report(&self.core, &self.supervisor, child, record.as_ref()).await
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
            && is_within(&self.core, &parent, me).await.map_err(failed)?
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
pub(super) async fn background_pending(core: &Core, root: &SessionId) -> bool {
    if core.background.is_empty() {
        return false;
    }
    let parents: Vec<SessionId> = core.background.iter().map(|e| e.value().clone()).collect();
    for parent in parents {
        if is_within(core, &parent, root).await.unwrap_or(false) {
            return true;
        }
    }
    false
}

/// Whether `id`'s actor is live and running its loop.
async fn is_busy(supervisor: &Addr<super::Supervisor>, id: &SessionId) -> bool {
    match supervisor.send(Live { id: id.clone() }).await {
        Ok(Some(addr)) => addr.send(IsBusy).await.unwrap_or(false),
        _ => false,
    }
}

/// The report on `child`: running while its loop runs, else how its last run ended.
async fn report(
    core: &Core,
    supervisor: &Addr<super::Supervisor>,
    child: &SessionId,
    record: Option<&BackgroundTask>,
) -> Result<ChildReport, ToolError> {
    let busy = is_busy(supervisor, child).await;
    let history = core.store.messages(child).await.map_err(failed)?;
    let since = record.map_or(0, |r| r.started);
    let answers: Vec<&MessageWithParts> = history
        .iter()
        .filter(|m| m.is_answer_since(since))
        .collect();
    let (ended, error) = answers
        .last()
        .map_or((ChildStatus::Completed, None), |m| status_of(&m.info));
    let status = if core.queued.contains_key(child) {
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
fn status_of(message: &Message) -> (ChildStatus, Option<String>) {
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
fn last_text(message: Option<&MessageWithParts>, answers: &[&MessageWithParts]) -> String {
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

/// How a background run ended: its answer or why there is none, and whether a run-time limit
/// stopped it.
struct Ended {
    result: Result<MessageWithParts, RuntimeError>,
    timed_out: Option<(TimeoutReason, Duration)>,
}

impl Ended {
    fn plain(result: Result<MessageWithParts, RuntimeError>) -> Self {
        Ended {
            result,
            timed_out: None,
        }
    }
}

/// A background child admitted to run: what it needs to start and be watched.
struct BackgroundRun {
    core: Arc<Core>,
    supervisor: Addr<super::Supervisor>,
    child: Session,
    new: bool,
    input: PromptInput,
    limits: RunLimits,
    home: Option<std::path::PathBuf>,
}

impl BackgroundRun {
    /// Starts the child and waits for its end, stopping its subtree when a run-time limit
    /// (`subagent.timeout`, `subagent.idle_timeout`) runs out; the clocks start now.
    async fn run(&self, cancel: &CancellationToken) -> Ended {
        let id = &self.child.id;
        // Its activity (as published) resets the idle clock.
        // Its parent does not wait for it: its clock is its own.
        let activity = Arc::new(Activity::new());
        let _listed = Listed::new(&self.core.clocks, id, &activity);
        let clock_start = tokio::time::Instant::now();
        let mut events = self.core.bus.subscribe(Filter::Session(id.clone()));
        let seen = activity.clone();
        let watcher = tokio::spawn(async move {
            let mut filter = ActivityFilter::default();
            while let Some(item) = events.next().await {
                match item {
                    BusItem::Event(e) if filter.is_activity(&e.event) => seen.touch(),
                    BusItem::Event(_) => {}
                    BusItem::Lagged(_) => seen.touch(),
                }
            }
        });
        // A cancel that came after its slot was given and before it started: it never starts.
        if cancel.is_cancelled() {
            watcher.abort();
            return Ended::plain(Err(RuntimeError::Cancelled));
        }
        let reply = match self.start().await {
            Ok(reply) => reply,
            Err(e) => {
                watcher.abort();
                return Ended::plain(Err(e));
            }
        };
        // A cancel that came while it was being started (its tree's walk took it out of the
        // waiting map and cancelled its token, but found no live actor) reaches it now.
        self.core.queued.remove(id);
        if cancel.is_cancelled() {
            self.supervisor.do_send(CancelTree { id: id.clone() });
        }
        tokio::pin!(reply);
        let ended = tokio::select! {
            r = &mut reply => Ended::plain(flatten(r, id)),
            expired = timeout::expiry(self.limits, clock_start, &activity) => {
                self.supervisor.do_send(CancelTree { id: id.clone() });
                let result = tokio::time::timeout(CANCEL_WAIT, &mut reply)
                    .await
                    .map_or(Err(RuntimeError::Cancelled), |r| flatten(r, id));
                Ended { result, timed_out: Some(expired) }
            }
        };
        watcher.abort();
        ended
    }

    /// Starts the child's actor with its task; the reply comes when its run ends.
    async fn start(&self) -> Result<Reply, RuntimeError> {
        let child = &self.child;
        let parent = child.parent_id.as_ref();
        // Its run outlives the call that started it: no parent token.
        let run = start_child(
            &self.supervisor,
            child.clone(),
            self.new,
            parent,
            self.input.clone(),
            None,
        )
        .await?;
        Ok(run.reply)
    }
}

/// A reply as a result: a dropped reply is a crashed child.
fn flatten(
    reply: Result<Result<MessageWithParts, RuntimeError>, tokio::sync::oneshot::error::RecvError>,
    child: &SessionId,
) -> Result<MessageWithParts, RuntimeError> {
    reply.unwrap_or_else(|_| Err(RuntimeError::Crashed(child.to_string())))
}

/// Records how the background run of `record` ended, with its `<task_result>` text.
async fn record_end(
    core: &Core,
    mut record: BackgroundTask,
    ended: Ended,
    home: Option<&std::path::Path>,
) -> BackgroundTask {
    let Ended {
        result: ended,
        timed_out,
    } = ended;
    let child = record.child_id.clone();
    let history = match core.store.messages(&child).await {
        Ok(history) => history,
        Err(e) => {
            tracing::warn!(session = %child, "reading the background child's messages failed: {e}");
            Vec::new()
        }
    };
    let answers: Vec<&MessageWithParts> = history
        .iter()
        .filter(|m| m.is_answer_since(record.started))
        .collect();
    let (status, error) = match (&ended, timed_out) {
        (_, Some((reason, after))) => (
            ChildStatus::Timeout,
            Some(format!(
                "SUBAGENT_TIMEOUT: stopped after {}s ({}; timeoutReason: {})",
                after.as_secs_f64(),
                match reason {
                    TimeoutReason::Runtime => "subagent.timeout or the call's timeout",
                    TimeoutReason::Idle => "no model or tool activity, subagent.idle_timeout",
                },
                reason.as_str()
            )),
        ),
        (Ok(message), None) => status_of(&message.info),
        (Err(RuntimeError::Cancelled), None) => (ChildStatus::Cancelled, None),
        (Err(RuntimeError::Stopped), None) => (
            ChildStatus::Error,
            Some(format!(
                "interrupted: the runtime running subagent session {child} stopped before it finished; continue it with the task tool's session_id {child}"
            )),
        ),
        (Err(e), None) => (ChildStatus::Error, Some(e.to_string())),
    };
    let text = last_text(ended.as_ref().ok(), &answers);
    record.status = status;
    record.result = Some(task_result_text(
        &child,
        status,
        &text,
        error.as_deref(),
        home,
    ));
    if let Err(e) = core.store.put_background(&record).await {
        tracing::warn!(session = %child, "storing the background child's result failed: {e}");
    }
    record
}

/// Delivers every finished, undelivered background result in the store (at runtime start), or
/// only those of `within`'s tree. A child still recorded as running whose runtime is gone (it
/// crashed or stopped first) is recorded as interrupted, with its output so far, and that
/// result is delivered; children of live runtimes are left to them. Returns once the records
/// are sorted; deliveries go on.
pub(crate) async fn deliver_pending(core: Arc<Core>, within: Option<&SessionId>) {
    let pending = match core.store.undelivered_background().await {
        Ok(pending) => pending,
        Err(e) => {
            tracing::warn!("reading the undelivered background results failed: {e}");
            return;
        }
    };
    for mut record in pending {
        if let Some(root) = within
            && !is_within(&core, &record.parent_id, root)
                .await
                .unwrap_or(false)
        {
            continue;
        }
        let unfinished = matches!(record.status, ChildStatus::Running | ChildStatus::Queued);
        if !take_over(&core, &mut record, unfinished).await {
            continue;
        }
        if unfinished {
            let stopped = Ended::plain(Err(RuntimeError::Stopped));
            record = record_end(&core, record, stopped, core.paths.home.as_deref()).await;
        }
        let core = core.clone();
        tokio::spawn(async move { deliver(&core, record).await });
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
        Some(owner) if is_alive(&core.paths.data_dir, owner) => return false,
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

/// Sends `record`'s result into its parent and marks it delivered once it is stored there.
async fn deliver(core: &Arc<Core>, mut record: BackgroundTask) {
    let parent = record.parent_id.clone();
    let Some(text) = record.result.clone() else {
        return;
    };
    match try_deliver(core, &record, text).await {
        Ok(true) => {
            record.delivered = true;
            if let Err(e) = core.store.put_background(&record).await {
                tracing::warn!(session = %parent, "marking a background result delivered failed: {e}");
            }
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(session = %parent, child = %record.child_id, "delivering a background result failed (kept for the next start): {e}");
        }
    }
}

/// Sends the delivery message and waits until the parent has handled it; answers whether the
/// message is now in the parent's history.
async fn try_deliver(
    core: &Arc<Core>,
    record: &BackgroundTask,
    text: String,
) -> Result<bool, RuntimeError> {
    let id = &record.parent_id;
    // One delivery into a parent at a time: a result stored without a reply must not find the
    // parent busy storing another one and fall back to starting a turn.
    let lock = core.deliveries.entry(id.clone()).or_default().clone();
    let delivered = {
        let _one_at_a_time = lock.lock().await;
        deliver_now(core, record, text).await
    };
    drop(lock);
    core.deliveries
        .remove_if(id, |_, lock| Arc::strong_count(lock) == 1);
    delivered
}

/// [`try_deliver`] once the parent's delivery lock is held.
async fn deliver_now(
    core: &Arc<Core>,
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
        core,
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
    core: &Core,
    session: &Session,
    input: PromptInput,
    quiet: bool,
) -> Result<Reply, RuntimeError> {
    let supervisor = core.supervisor().ok_or(RuntimeError::Stopped)?;
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
    supervisor: &Addr<super::Supervisor>,
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
        })
        .await
        .map_err(|_| RuntimeError::Stopped)
}
