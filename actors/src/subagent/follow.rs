//! Following a child while its task call waits: its reply, its events (mirrored on the
//! caller's part), its clocks, and the background children of its subtree.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::{Map, Value, json};
use taskforce_agents::id::{PartId, SessionId, now_ms};
use taskforce_agents::model::{Message, PartKind, Session, SummaryItem, ToolMetadata};
use taskforce_agents::tool::redact::redact_in_place;
use taskforce_agents::tool::{
    SubagentOutcome, SubagentRequest, SubagentStatus, ToolContext, ToolError,
};
use tokio::sync::watch;

use super::Subagents;
use super::admission::{self, Lease};
use super::answer::{self, last_text, reply_of};
use super::call::{ABORTED, SubagentDelegate, failed, start_child};
use super::clock::{self, Activity, ActivityFilter, Hold, Listed, RunLimits};
use crate::RuntimeError;
use crate::bus::{BusItem, Event, Filter, Subscription};
use crate::session::SubtaskRun;
use crate::supervisor::{CancelTree, Places};

/// How long a cancelled child may take to record its end before its parent moves on.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// A task call let in: its child, and what starting and following the child needs.
pub(super) struct Admitted {
    /// What is left of the request once the child is shown on the caller's part.
    request: SubagentRequest,
    child: Session,
    /// The child is new (not a continued session).
    new: bool,
    /// The child may delegate in its turn.
    nests: bool,
    /// The child runs on another node of the cluster.
    pub(super) elsewhere: bool,
}

impl SubagentDelegate {
    /// Lets a call of this delegate's session (whose clock, if it runs as a child, is `clock`)
    /// in: prepares `request`'s child, waits for a running slot (counting a new child in its
    /// tree) and shows the child on the caller's part. The caller's running share is lent (in
    /// `lease`, with the child's slot) from the moment the call waits for a slot.
    pub(super) async fn admit_call(
        &self,
        ctx: &ToolContext,
        mut request: SubagentRequest,
        clock: Option<&Arc<Activity>>,
        lease: &mut Lease,
    ) -> Result<Admitted, ToolError> {
        let parent = &self.parent;
        // Boxed: preparing the child is brief, and its state would widen the whole call's.
        let (child, new, nests) = Box::pin(self.prepare_child(&ctx.agent, &request)).await?;
        // Wait for a running slot (and count a new child in its tree) before anything starts.
        let root = self.root_of(parent).await?;
        let call = admission::Call {
            parent: &parent.id,
            child: &child.id,
            root: &root,
            new,
            clock,
            roams: self.subagents.in_cluster(),
        };
        lease.aside = Some(self.subagents.limits.step_aside(&parent.id));
        let admission = admission::admit(&self.subagents, ctx, call).await?;
        let elsewhere = admission.slot.is_elsewhere();
        lease.slot = Some(admission.slot);
        if let Some(reservation) = admission.reservation {
            reservation.keep();
        }
        self.core.bus.register_parent(&child.id, &parent.id);
        let mut live = Map::new();
        live.insert("sessionId".into(), json!(child.id));
        live.insert(
            "model".into(),
            serde_json::to_value(&request.model).unwrap_or(Value::Null),
        );
        ctx.metadata(Some(std::mem::take(&mut request.description)), live);
        // The call lasts as long as its child: it is on disk as running, naming the child, from
        // now on (not only once it has run a while), so that a crash leaves both found.
        ctx.store_running();
        Ok(Admitted {
            request,
            child,
            new,
            nests,
            elsewhere,
        })
    }

    /// Starts an admitted call's child, mirrors its tool calls and watches its time limits
    /// until it answers (and, if it left background children at work, until their results
    /// reached it). A child whose background children are waited for lends its share in
    /// `lease`.
    pub(super) async fn follow_child(
        &self,
        ctx: &ToolContext,
        admitted: Admitted,
        clock: Option<&Arc<Activity>>,
        lease: &mut Lease,
    ) -> Result<SubagentOutcome, ToolError> {
        let parent = &self.parent;
        let Admitted {
            mut request,
            child,
            new,
            nests,
            elsewhere,
        } = admitted;
        // Mirror the child's tool calls on the parent's running part while the call runs; the
        // child's activity resets the idle clock.
        let run_limits = RunLimits::new(&self.core.config.subagent, request.timeout);
        // Its activity is its caller's too (the caller waits for it).
        let activity = Arc::new(Activity::under(clock.cloned()));
        let _listed = Listed::new(&self.subagents.clocks, &child.id, &activity);
        let clock_start = tokio::time::Instant::now();
        // Subscribed before the child starts, followed while waiting for it (no task of its
        // own: one call, one task).
        let mut events = Some(self.core.bus.subscribe(Filter::Session(child.id.clone())));
        let mut follower = Follower::new(child.id.clone(), activity.clone(), ctx.home.as_deref());

        let input = self.child_input(&mut request, nests, new);
        let started = now_ms();
        // The child's run is tied to this call's token (a child token, or relayed on the child's
        // arbiter): cancelling the parent's run (its whole tree) reaches every descendant, with
        // no message per level.
        let within = Some(ctx.abort.clone());
        // Moved into the child's actor: only its id is needed here afterwards.
        let child_id = child.id.clone();
        // Boxed: the start is brief, and its state would double the size of the whole wait.
        let start = Box::pin(async {
            match within {
                Some(within) if elsewhere => self
                    .subagents
                    .run_elsewhere(child, new, &parent.id, input, within),
                within => {
                    start_child(
                        &self.subagents.supervisor,
                        child,
                        new,
                        Some(&parent.id),
                        input,
                        within,
                        // Beside the call: a root's call runs on the arbiter it chose for the
                        // child (see `follow_placed`).
                        Places::here(),
                    )
                    .await
                }
            }
        });
        let SubtaskRun {
            reply,
            tied,
            answers: book,
        } = match start.await {
            Ok(started) => started,
            Err(e) => {
                return Err(match e {
                    RuntimeError::Crashed(_) => ToolError::Failed(format!(
                        "subagent session {} stopped unexpectedly",
                        child_id
                    )),
                    e => failed(e),
                });
            }
        };
        let run = async { reply_of(reply.await, &child_id) };
        tokio::pin!(run);
        let expiry = clock::expiry(run_limits, clock_start, &activity);
        tokio::pin!(expiry);
        let mut timed_out = None;
        // Once the child has answered while background children it (or its subtree) started
        // are still at work: the call waits for their results to reach it and for the turns
        // they start, so that its answer covers them (see `BackgroundWait`).
        let mut waiting: Option<BackgroundWait> = None;
        let result = loop {
            tokio::select! {
                // The child's reply first: once it is in, neither a cancel nor the clock has
                // anything left to wait for (a cancelled tree's leaves often reply before their
                // parents' calls are polled).
                biased;
                r = &mut run, if waiting.is_none() => {
                    if r.is_ok() && self.subagents.background_pending(&child_id).await {
                        lease.lent = Some(self.subagents.limits.step_aside(&child_id));
                        waiting = Some(BackgroundWait::new(&self.subagents));
                        if events.is_none() {
                            events = Some(self.core.bus.subscribe(Filter::Session(child_id.clone())));
                        }
                        continue;
                    }
                    break r;
                }
                () = ctx.abort.cancelled() => {
                    // Nothing more to mirror: the parent's call is over (unsubscribed before
                    // the child's last events, which would otherwise be drained on the drop).
                    drop(events.take());
                    // A run started by this call ends with it (its token is a child of the
                    // call's, or relayed from it); only a run that was already going, or
                    // background children, need telling.
                    if !tied || waiting.is_some() {
                        self.subagents.supervisor.do_send(CancelTree { id: child_id.clone() });
                    }
                    if waiting.is_some() {
                        break Err(ToolError::Aborted);
                    }
                    // Let the child record how it ended, but never wait long for it.
                    break tokio::time::timeout(CANCEL_GRACE, &mut run)
                        .await
                        .unwrap_or(Err(ToolError::Aborted));
                }
                // Before the clock: an event already in counts as activity.
                Some(item) = next_event(&mut events) => {
                    // The events already in are taken together: the parent's part changes once
                    // for them (a busy parent is not asked to mirror each step of a burst).
                    let mut item = Some(item);
                    let mut idle = false;
                    while let Some(it) = item {
                        if follower.on(it).is_break() {
                            idle = true;
                            break;
                        }
                        item = next_event(&mut events).now_or_never().flatten();
                    }
                    follower.mirror(ctx);
                    if idle && waiting.is_none() {
                        events = None;
                    }
                    // The child's status may have changed: a waiting call looks again.
                    if let Some(w) = &mut waiting
                        && self.all_delivered(w, &child_id, &activity).await
                    {
                        break answer::latest_answer(&*self.core.store, &child_id, started).await;
                    }
                }
                () = BackgroundWait::changed(&mut waiting) => {
                    if let Some(w) = &mut waiting
                        && self.all_delivered(w, &child_id, &activity).await
                    {
                        break answer::latest_answer(&*self.core.store, &child_id, started).await;
                    }
                }
                expired = &mut expiry => {
                    timed_out = Some(expired);
                    // Nothing more to mirror: unsubscribed before the child's last events.
                    drop(events.take());
                    self.subagents.supervisor.do_send(CancelTree { id: child_id.clone() });
                    if waiting.is_some() {
                        break answer::latest_answer(&*self.core.store, &child_id, started).await;
                    }
                    break tokio::time::timeout(CANCEL_GRACE, &mut run)
                        .await
                        .unwrap_or(Err(ToolError::Aborted));
                }
            }
        };
        drop(waiting);
        let (message, status) = match result {
            Ok(message) => {
                let status = match &*message.info {
                    Message::Assistant(a) => match &a.error {
                        None => SubagentStatus::Completed,
                        Some(e) if e.name() == ABORTED => SubagentStatus::Cancelled,
                        Some(e) => SubagentStatus::Failed(format!(
                            "subagent session {} failed: {}",
                            child_id,
                            e.message().unwrap_or(e.name())
                        )),
                    },
                    Message::User(_) => SubagentStatus::Completed,
                };
                (Some(message), status)
            }
            Err(ToolError::Aborted) => (None, SubagentStatus::Cancelled),
            Err(e) => (None, SubagentStatus::Failed(e.to_string())),
        };
        let status = match timed_out {
            Some((reason, after)) => SubagentStatus::TimedOut { reason, after },
            None => status,
        };
        // What the child wrote during this run (usage, display items, summary): from its
        // actor's memory, else as stored.
        let digest = answer::child_digest(&*self.core.store, &book, &child_id, started).await;
        let text = message
            .as_ref()
            .and_then(|m| last_text(m.parts.iter().map(|p| &**p)))
            .or(digest.text)
            .unwrap_or_default();
        Ok(SubagentOutcome {
            session_id: child_id.clone(),
            text,
            model: request.model,
            summary: digest.summary,
            status,
            usage: digest.usage,
            display_items: digest.display_items,
        })
    }
}

impl SubagentDelegate {
    /// Whether a call whose child has answered has nothing left to wait for: the child idle
    /// and every background result of its subtree delivered. Meanwhile the child's clock is
    /// held while the child itself is idle (waiting on its children is not idling; they have
    /// clocks of their own), and runs while a delivered result gives it a turn of its own.
    async fn all_delivered(
        &self,
        waiting: &mut BackgroundWait,
        child: &SessionId,
        activity: &Arc<Activity>,
    ) -> bool {
        if self.core.statuses.contains_key(child) {
            waiting.hold = None;
            false
        } else if !self.subagents.background_pending(child).await {
            true
        } else {
            if waiting.hold.is_none() {
                waiting.hold = Some(activity.hold());
            }
            false
        }
    }
}

/// A call waiting for its child's background children (see `follow_child`): it looks again
/// whenever the runtime's background children change, and whenever the child's events say its
/// status did.
struct BackgroundWait {
    changed: watch::Receiver<u64>,
    /// The child's clock, held while the child itself is idle.
    hold: Option<Hold>,
}

impl BackgroundWait {
    /// Waiting from now on; the first look is at once.
    fn new(subagents: &Subagents) -> Self {
        let mut changed = subagents.background_changed.subscribe();
        changed.mark_changed();
        BackgroundWait {
            changed,
            hold: None,
        }
    }

    /// The next change of the background children, or never while the call does not wait.
    async fn changed(waiting: &mut Option<BackgroundWait>) {
        let changed = match waiting {
            Some(w) => w.changed.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            std::future::pending::<()>().await;
        }
    }
}

/// The next event of a followed child, or never once it is no longer followed.
async fn next_event(events: &mut Option<Subscription>) -> Option<BusItem> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// Follows a child's events while its parent's call runs: mirrors its tool calls (status and
/// title) on the parent's running part, and counts its activity for the idle clock.
struct Follower<'a> {
    child: SessionId,
    activity: Arc<Activity>,
    summary: BTreeMap<PartId, SummaryItem>,
    /// Whether the summary changed since the parent's part last showed it.
    changed: bool,
    /// The user's home, shortened to `~` in the titles shown.
    home: Option<&'a Path>,
    filter: ActivityFilter,
}

impl<'a> Follower<'a> {
    fn new(child: SessionId, activity: Arc<Activity>, home: Option<&'a Path>) -> Self {
        Follower {
            child,
            activity,
            home,
            summary: BTreeMap::new(),
            changed: false,
            filter: ActivityFilter::default(),
        }
    }

    /// Takes in one of the child's events; breaks once the child is idle. What changed is
    /// shown on the parent's part by [`mirror`](Self::mirror).
    fn on(&mut self, item: BusItem) -> ControlFlow<()> {
        let envelope = match item {
            BusItem::Event(envelope) => envelope,
            BusItem::Lagged(_) => {
                self.activity.touch();
                return ControlFlow::Continue(());
            }
        };
        if self.filter.is_activity(&envelope.event) {
            self.activity.touch();
        }
        match &envelope.event {
            Event::SessionIdle { session_id } if *session_id == self.child => {
                return ControlFlow::Break(());
            }
            Event::PartUpdated { part } => {
                let PartKind::Tool(tool) = &part.kind else {
                    return ControlFlow::Continue(());
                };
                let mut entry = SummaryItem::of(part.id.as_str(), &tool.tool, &tool.state);
                if let Some(title) = &mut entry.state.title {
                    redact_in_place(title, self.home);
                }
                // The parent's part changes only when a child's call changes status or title,
                // not on every live update of its metadata.
                if self.summary.get(&part.id) != Some(&entry) {
                    self.summary.insert(part.id.clone(), entry);
                    self.changed = true;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    /// Shows the summary on the parent's running part when it changed; no longer once the
    /// parent's call is aborted (its final state carries the summary).
    fn mirror(&mut self, ctx: &ToolContext) {
        if !std::mem::take(&mut self.changed) || ctx.abort.is_cancelled() {
            return;
        }
        let mut live = ToolMetadata::new();
        live.set_summary(self.summary.values().cloned().collect());
        ctx.metadata(None, live);
    }
}
