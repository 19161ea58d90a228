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

mod deliver;
mod report;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use taskforce_agents::id::{SessionId, now_ms};
use taskforce_agents::model::Session;
use taskforce_agents::tool::background::{ChildStatus, task_result_text};
use taskforce_agents::tool::{SubagentRequest, TimeoutReason, ToolContext, ToolError};
use tokio_util::sync::CancellationToken;

use super::Subagents;
use super::admission;
use super::call::{SubagentDelegate, failed, start_child};
use super::clock::{self, Activity, ActivityFilter, Listed, RunLimits};
use crate::RuntimeError;
use crate::bus::{BusItem, Filter};
use crate::session::{PromptInput, Reply};
use crate::store::{BackgroundTask, MessageWithParts, Store};
use crate::supervisor::{Adopt, CancelTree};
use report::{last_text, status_of};

/// How long `task_cancel` waits for the child to record its end.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

impl SubagentDelegate {
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
        let reservation = admission::reserve(&self.subagents, &root, new).await?;
        // Its turn for a slot is taken now, so background calls start in the order made.
        let waiting = self.subagents.limits.enqueue(&parent.id, &child.id);
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
        self.subagents
            .queued
            .insert(child.id.clone(), cancel.clone());
        let adopted = self
            .subagents
            .supervisor
            .send(Adopt {
                id: child.id.clone(),
                parent: parent.id.clone(),
            })
            .await;
        if adopted.is_err() {
            self.subagents.queued.remove(&child.id);
            return Err(failed(RuntimeError::Stopped));
        }
        let input = self.child_input(&mut request, nests, new);
        let run = BackgroundRun {
            subagents: self.subagents.clone(),
            child: child.clone(),
            new,
            input,
            limits: RunLimits::new(&self.core.config.subagent, request.timeout),
            home: ctx.home.clone(),
        };
        let (recorded, unrecorded) = tokio::sync::watch::channel(());
        self.subagents
            .unrecorded
            .insert(child.id.clone(), unrecorded);
        self.subagents.background_started(&child.id, &parent.id);
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
            run.subagents.queued.remove(&run.child.id);
            let record = record_end(
                &*run.subagents.core.store,
                record,
                ended,
                run.home.as_deref(),
            )
            .await;
            run.subagents.unrecorded.remove(&run.child.id);
            drop(recorded);
            run.subagents.deliver(record).await;
            run.subagents.background_ended(&run.child.id);
        });
        Ok(child.id)
    }
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
    subagents: Arc<Subagents>,
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
        let _listed = Listed::new(&self.subagents.clocks, id, &activity);
        let clock_start = tokio::time::Instant::now();
        let mut events = self
            .subagents
            .core
            .bus
            .subscribe(Filter::Session(id.clone()));
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
        self.subagents.queued.remove(id);
        if cancel.is_cancelled() {
            self.subagents
                .supervisor
                .do_send(CancelTree { id: id.clone() });
        }
        tokio::pin!(reply);
        let ended = tokio::select! {
            r = &mut reply => Ended::plain(flatten(r, id)),
            expired = clock::expiry(self.limits, clock_start, &activity) => {
                self.subagents.supervisor.do_send(CancelTree { id: id.clone() });
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
            &self.subagents.supervisor,
            child.clone(),
            self.new,
            parent,
            self.input.clone(),
            None,
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
    store: &dyn Store,
    mut record: BackgroundTask,
    ended: Ended,
    home: Option<&std::path::Path>,
) -> BackgroundTask {
    let Ended {
        result: ended,
        timed_out,
    } = ended;
    let child = record.child_id.clone();
    let history = match store.messages(&child).await {
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
    if let Err(e) = store.put_background(&record).await {
        tracing::warn!(session = %child, "storing the background child's result failed: {e}");
    }
    record
}
