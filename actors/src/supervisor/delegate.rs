//! The task tool's delegate: runs a subagent in a child session and reports on it live.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use async_trait::async_trait;
use futures::StreamExt;
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::{PartId, SessionId, now_ms};
use taskforce_agents::model::{Message, Part, PartKind, Session, SummaryItem, ToolMetadata};
use taskforce_agents::permission::{Action, Rule, merge};
use taskforce_agents::tool::background::{ChildReport, ChildStatus};
use taskforce_agents::tool::redact::redact_in_place;
use taskforce_agents::tool::{
    Delegate, DisplayItem, SubagentOutcome, SubagentRequest, SubagentStatus, TaskError,
    TaskErrorCode, TaskFailure, TaskUsage, ToolContext, ToolError,
};
use tokio_util::sync::CancellationToken;

use super::background::background_pending;
use super::limits::Lease;
use super::timeout::{Activity, ActivityFilter, Hold, Listed, RunLimits};
use super::{
    Activate, CancelTree, Supervisor, is_within, limits, session_depth, task_guard, timeout,
};
use crate::RuntimeError;
use crate::bus::{BusItem, Event, Filter};
use crate::core::Core;
use crate::session::{AnswerBook, PartInput, PromptInput, Seed, Subtask, SubtaskRun};
use crate::store::MessageWithParts;

/// How long a cancelled child may take to record its end before its parent moves on.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// The name of the error an aborted assistant message carries.
pub(super) const ABORTED: &str = "MessageAbortedError";

/// Starts child sessions for task calls through the supervisor.
pub struct SupervisorDelegate {
    pub(super) core: Arc<Core>,
    pub(super) supervisor: Addr<Supervisor>,
    /// The calling session.
    pub(super) parent: Arc<Session>,
}

impl SupervisorDelegate {
    pub(crate) fn new(core: Arc<Core>, supervisor: Addr<Supervisor>, parent: Arc<Session>) -> Self {
        SupervisorDelegate {
            core,
            supervisor,
            parent,
        }
    }

    /// The tools a child may not use: todos, the primary-only tools, and task unless the child
    /// may delegate itself (`nests`: its depth is below `subagent.max_depth`).
    pub(super) fn denied_tools(&self, nests: bool) -> Vec<String> {
        let mut tools: Vec<String> = ["todowrite", "todoread"].map(String::from).to_vec();
        if !nests {
            tools.extend(["task", "task_status", "task_cancel"].map(String::from));
        }
        for t in &self.core.config.experimental.primary_tools {
            if !tools.contains(t) {
                tools.push(t.clone());
            }
        }
        tools
    }

    /// The task as the child's prompt: its agent and model, and the tools it may not use
    /// switched off. The request's prompt and agent are moved into it (the call keeps no copy
    /// of them while the child runs). A continued child (not `new`) names no agent: it runs
    /// the agent it was started for, whatever `subagent_type` the continuing call gave.
    pub(super) fn child_input(
        &self,
        request: &mut SubagentRequest,
        nests: bool,
        new: bool,
    ) -> PromptInput {
        let tools: IndexMap<String, bool> = self
            .denied_tools(nests)
            .into_iter()
            .map(|t| (t, false))
            .collect();
        PromptInput {
            parts: vec![PartInput::text(std::mem::take(&mut request.prompt))],
            agent: new.then(|| std::mem::take(&mut request.agent)),
            model: Some(request.model.clone()),
            tools: Some(tools),
            ..Default::default()
        }
    }

    /// The existing child to continue, or a new child of `parent` for `request`'s agent.
    /// Either is bounded by the caller's effective rules: `caller`'s (the agent running the
    /// call) merged with the parent session's, and the layers that bound the parent. A new
    /// child stores them (so that a child prompted later, after a restart too, is still
    /// bounded); a continued one adds those it lacks (a child is never widened by being
    /// continued from a less restricted session than the one that started it).
    pub(super) async fn child_session(
        &self,
        parent: &Session,
        caller: &AgentInfo,
        request: &SubagentRequest,
        nests: bool,
    ) -> Result<(Session, bool), ToolError> {
        let store = &self.core.store;
        let caller_rules = merge(&[&caller.permission, parent.rules()]);
        // A background child this runtime runs may not be stored yet (its row goes to disk
        // with its first message): it is refused all the same, never taken for a new session.
        if let Some(raw) = &request.session_id
            && let Ok(id) = SessionId::parse(raw)
            && self.core.background.contains_key(&id)
        {
            return Err(not_continuable(raw, STILL_RUNNING));
        }
        if let Some(raw) = &request.session_id
            && let Ok(id) = SessionId::parse(raw)
            && let Some(mut existing) = store.session(&id).await.map_err(failed)?
        {
            self.check_continuable(parent, &existing, raw).await?;
            let mut callers = Vec::with_capacity(parent.caller_permission.len() + 1);
            callers.push(caller_rules);
            callers.extend(parent.caller_permission.iter().cloned());
            if existing.bound_by(&callers) {
                store.put_session(&existing).await.map_err(failed)?;
            }
            return Ok((existing, false));
        }
        let rules = self
            .denied_tools(nests)
            .into_iter()
            .map(|t| Rule::new(t, "*", Action::Deny))
            .collect();
        let title = format!("{} (@{} subagent)", request.description, request.agent);
        // Stored (and announced) by the child's loop together with its first message.
        let child = Session::child_of(parent, title, now_ms())
            .with_permission(rules)
            .delegated_by(request.agent.clone(), caller_rules);
        Ok((child, true))
    }

    /// Refuses (`INVALID_INPUT`) to continue `existing` from `parent` when that could only
    /// deadlock or lose a result: the caller itself or one of its ancestors (each waits for
    /// the other), a session of another tree, or a background child whose run is still going
    /// or whose result is not delivered yet.
    async fn check_continuable(
        &self,
        parent: &Session,
        existing: &Session,
        raw: &str,
    ) -> Result<(), ToolError> {
        let refuse = |why: &str| Err(not_continuable(raw, why));
        if existing.id == parent.id {
            return refuse("is the calling session itself");
        }
        if is_within(&self.core, &parent.id, &existing.id)
            .await
            .map_err(failed)?
        {
            return refuse("is an ancestor of the calling session (it is waiting for this call)");
        }
        if self.root_of(existing).await? != self.root_of(parent).await? {
            return refuse("belongs to another session tree");
        }
        let record = self
            .core
            .store
            .background(&existing.id)
            .await
            .map_err(failed)?;
        if let Some(r) = record {
            if r.status == ChildStatus::Running {
                return refuse(STILL_RUNNING);
            }
            if !r.delivered {
                return refuse("has a background result not delivered yet");
            }
        }
        Ok(())
    }

    pub(super) async fn root_of(&self, session: &Session) -> Result<SessionId, ToolError> {
        let mut current = session.clone();
        for _ in 0..256 {
            match &current.parent_id {
                None => return Ok(current.id),
                Some(p) => match self.core.store.session(p).await.map_err(failed)? {
                    Some(s) => current = s,
                    None => return Ok(current.id),
                },
            }
        }
        Ok(current.id)
    }
}

/// Why a background child still at work cannot be continued.
const STILL_RUNNING: &str =
    "is still running in the background; wait for its <task_result> or stop it with task_cancel";

/// The `INVALID_INPUT` refusal to continue session `raw`, saying `why`.
fn not_continuable(raw: &str, why: &str) -> ToolError {
    ToolError::Task(Box::new(TaskFailure {
        error: TaskError::new(
            TaskErrorCode::InvalidInput,
            format!("session_id {raw} {why}; omit session_id to start a new task"),
        ),
        metadata: ToolMetadata::new(),
        cause: None,
    }))
}

pub(super) fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

#[async_trait]
impl Delegate for SupervisorDelegate {
    async fn admit(&self, _ctx: &ToolContext) -> Result<(), TaskError> {
        match task_guard(&self.core, &self.parent).await {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    async fn run_subagent(
        &self,
        ctx: &ToolContext,
        request: SubagentRequest,
    ) -> Result<SubagentOutcome, ToolError> {
        // The caller waits for this call: it lends its running share meanwhile (so that its
        // children never wait on it) and takes it back before it goes on.
        let clock = timeout::clock_of(&self.core.clocks, &self.parent.id);
        let mut lease = Lease::default();
        let result = self
            .call_child(ctx, request, clock.as_ref(), &mut lease)
            .await;
        if !ctx.abort.is_cancelled() {
            let _busy = clock.as_ref().map(Activity::hold);
            tokio::select! {
                biased;
                // Cut short: the share comes back at once (the caller's run is ending).
                () = ctx.abort.cancelled() => {}
                () = lease.end() => {}
            }
        }
        result
    }

    async fn start_background(
        &self,
        ctx: &ToolContext,
        request: SubagentRequest,
    ) -> Result<SessionId, ToolError> {
        self.start_background_child(ctx, request).await
    }

    async fn task_status(
        &self,
        _ctx: &ToolContext,
        child: &SessionId,
    ) -> Result<ChildReport, ToolError> {
        self.child_report(child).await
    }

    async fn task_cancel(
        &self,
        _ctx: &ToolContext,
        child: &SessionId,
    ) -> Result<ChildReport, ToolError> {
        self.cancel_child(child).await
    }
}

impl SupervisorDelegate {
    /// Runs `request`'s child for a call of this delegate's session (whose clock, if it runs
    /// as a child, is `clock`): waits for a running slot, starts the child, mirrors its tool
    /// calls and watches its time limits until it answers. The caller's running share is lent
    /// (in `lease`, with the child's slot) from the moment the call waits for a slot.
    async fn call_child(
        &self,
        ctx: &ToolContext,
        mut request: SubagentRequest,
        clock: Option<&Arc<Activity>>,
        lease: &mut Lease,
    ) -> Result<SubagentOutcome, ToolError> {
        let parent = &self.parent;
        // The child sits one below its parent; it keeps the task tool while that is above the
        // limit (its own guard hides the tool once it is at the limit).
        let child_depth = session_depth(&self.core, parent).await + 1;
        let nests =
            self.core.config.subagent.enabled && child_depth < self.core.config.subagent.max_depth;
        let (child, new) = self
            .child_session(parent, &ctx.agent, &request, nests)
            .await?;
        // Wait for a running slot (and count a new child in its tree) before anything starts.
        let root = self.root_of(parent).await?;
        let call = limits::Call {
            parent: &parent.id,
            child: &child.id,
            root: &root,
            new,
            clock,
        };
        lease.aside = Some(self.core.limits.step_aside(&parent.id));
        let admission = limits::admit(&self.core, ctx, call).await?;
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

        // Mirror the child's tool calls on the parent's running part while the call runs; the
        // child's activity resets the idle clock.
        let run_limits = RunLimits::new(&self.core.config.subagent, request.timeout);
        // Its activity is its caller's too (the caller waits for it).
        let activity = Arc::new(Activity::under(clock.cloned()));
        let _listed = Listed::new(&self.core.clocks, &child.id, &activity);
        let clock_start = tokio::time::Instant::now();
        // Subscribed before the child starts, followed while waiting for it (no task of its
        // own: one call, one task).
        let mut events = Some(self.core.bus.subscribe(Filter::Session(child.id.clone())));
        let mut follower = Follower::new(child.id.clone(), activity.clone());

        let input = self.child_input(&mut request, nests, new);
        let started = now_ms();
        // The child's run is tied to this call's token (a child token, or relayed on the child's
        // arbiter): cancelling the parent's run (its whole tree) reaches every descendant, with
        // no message per level.
        let within = Some(ctx.abort.clone());
        // Moved into the child's actor: only its id is needed here afterwards.
        let child_id = child.id.clone();
        let start = start_child(
            &self.supervisor,
            child,
            new,
            Some(&parent.id),
            input,
            within,
        );
        let SubtaskRun {
            reply,
            tied,
            answers: book,
        } = match start.await {
            Ok(started) => started,
            Err(e) => {
                return Err(match e {
                    RuntimeError::Stopped => ToolError::Failed("the runtime has stopped".into()),
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
        let expiry = timeout::expiry(run_limits, clock_start, &activity);
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
                    if r.is_ok() && background_pending(&self.core, &child_id).await {
                        lease.lent = Some(self.core.limits.step_aside(&child_id));
                        waiting = Some(BackgroundWait::new());
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
                        self.supervisor.do_send(CancelTree { id: child_id.clone() });
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
                    if follower.on(item, ctx).is_break() && waiting.is_none() {
                        events = None;
                    }
                }
                () = BackgroundWait::tick(&mut waiting) => {
                    if self.core.statuses.contains_key(&child_id) {
                        // Its own turn (a result delivered): its activity is its own.
                        if let Some(w) = &mut waiting { w.hold = None; }
                    } else if !background_pending(&self.core, &child_id).await {
                        break self.latest_answer(&child_id, started).await;
                    } else if let Some(w) = &mut waiting
                        && w.hold.is_none()
                    {
                        // Waiting on its children is not idling; they have clocks of their own.
                        w.hold = Some(activity.hold());
                    }
                }
                expired = &mut expiry => {
                    timed_out = Some(expired);
                    // Nothing more to mirror: unsubscribed before the child's last events.
                    drop(events.take());
                    self.supervisor.do_send(CancelTree { id: child_id.clone() });
                    if waiting.is_some() {
                        break self.latest_answer(&child_id, started).await;
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
        let digest = self.child_digest(&book, &child_id, started).await;
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

/// How often a call waiting for its child's background children looks again.
const BACKGROUND_POLL: Duration = Duration::from_millis(50);

/// A call waiting for its child's background children (see `call_child`).
struct BackgroundWait {
    ticks: tokio::time::Interval,
    /// The child's clock, held while the child itself is idle.
    hold: Option<Hold>,
}

impl BackgroundWait {
    fn new() -> Self {
        BackgroundWait {
            ticks: tokio::time::interval(BACKGROUND_POLL),
            hold: None,
        }
    }

    /// The next look, or never while the call does not wait.
    async fn tick(waiting: &mut Option<BackgroundWait>) {
        match waiting {
            Some(w) => {
                w.ticks.tick().await;
            }
            None => std::future::pending().await,
        }
    }
}

/// The text of the last text part among `parts`.
fn last_text<'a>(parts: impl DoubleEndedIterator<Item = &'a Part>) -> Option<String> {
    parts
        .rev()
        .find_map(|p| p.as_text().map(|t| t.text.clone()))
}

/// The next event of a followed child, or never once it is no longer followed.
async fn next_event(events: &mut Option<crate::bus::Subscription>) -> Option<BusItem> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// Follows a child's events while its parent's call runs: mirrors its tool calls (status and
/// title) on the parent's running part, and counts its activity for the idle clock.
struct Follower {
    child: SessionId,
    activity: Arc<Activity>,
    summary: BTreeMap<PartId, SummaryItem>,
    filter: ActivityFilter,
}

impl Follower {
    fn new(child: SessionId, activity: Arc<Activity>) -> Self {
        Follower {
            child,
            activity,
            summary: BTreeMap::new(),
            filter: ActivityFilter::default(),
        }
    }

    /// Takes in one of the child's events; breaks once the child is idle.
    fn on(&mut self, item: BusItem, ctx: &ToolContext) -> ControlFlow<()> {
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
                    redact_in_place(title, ctx.home.as_deref());
                }
                // The parent's part changes only when a child's call changes status or title,
                // not on every live update of its metadata; and no longer once the parent's call
                // is aborted (its final state carries the summary).
                if self.summary.get(&part.id) == Some(&entry) {
                    return ControlFlow::Continue(());
                }
                self.summary.insert(part.id.clone(), entry);
                if !ctx.abort.is_cancelled() {
                    let mut live = Map::new();
                    live.insert("summary".into(), render(&self.summary));
                    ctx.metadata(None, live);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The summary metadata: `[{id, tool, state: {status, title?}}]` in part order.
fn render(summary: &BTreeMap<PartId, SummaryItem>) -> Value {
    Value::Array(
        summary
            .values()
            .filter_map(|item| serde_json::to_value(item).ok())
            .collect(),
    )
}

impl SupervisorDelegate {
    /// What the child wrote since `since`: read in its actor's memory when it has it (no wait
    /// for the disk, no message, nothing copied but what the result keeps), else in the store.
    /// The child's latest answer since `since` (its last turn's, after the turns its
    /// background results started).
    async fn latest_answer(
        &self,
        child: &SessionId,
        since: u64,
    ) -> Result<MessageWithParts, ToolError> {
        let history = self.core.store.messages(child).await.map_err(failed)?;
        history
            .into_iter()
            .rev()
            .find(|m| m.is_answer_since(since))
            .ok_or_else(|| ToolError::Failed(format!("subagent session {child} has no answer")))
    }

    async fn child_digest(&self, book: &AnswerBook, child: &SessionId, since: u64) -> Digest {
        if let Some(digest) = book.read(since, Digest::of) {
            return digest;
        }
        match self.core.store.messages(child).await {
            Ok(history) => Digest::of(
                history
                    .iter()
                    .filter(|m| m.is_answer_since(since))
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!(session = %child, "reading the child's messages failed: {e}");
                Digest::of(Vec::new())
            }
        }
    }
}

/// What a task's result takes from the child's answers of one run.
struct Digest {
    /// The text of the last answer with text.
    text: Option<String>,
    summary: Vec<SummaryItem>,
    usage: TaskUsage,
    display_items: Vec<DisplayItem>,
}

impl Digest {
    fn of(answers: Vec<&MessageWithParts>) -> Digest {
        Digest {
            text: answers
                .iter()
                .rev()
                .find_map(|a| last_text(a.parts.iter().map(|p| &**p))),
            summary: child_summary(&answers),
            usage: usage_of(&answers),
            display_items: display_items(&answers),
        }
    }
}

/// Starts `session`'s actor (a child of `parent`) and gives it its task, the run a child of
/// `within` (the parent's call) when given; its reply comes when the run ends.
pub(super) async fn start_child(
    supervisor: &Addr<Supervisor>,
    session: Session,
    new: bool,
    parent: Option<&SessionId>,
    input: PromptInput,
    within: Option<CancellationToken>,
) -> Result<SubtaskRun, RuntimeError> {
    let id = session.id.clone();
    let addr = supervisor
        .send(Activate {
            id: id.clone(),
            parent: parent.cloned(),
            seed: Some(Seed {
                session,
                empty: new,
                unsaved: new,
            }),
        })
        .await
        .map_err(|_| RuntimeError::Stopped)?;
    let caller = within.as_ref().map(|_| std::thread::current().id());
    addr.send(Subtask {
        input,
        within,
        caller,
        parent: parent.cloned(),
    })
    .await
    .map_err(|_| RuntimeError::Crashed(id.to_string()))?
}

/// A child's reply as the task call's result: its final message, or why there is none.
fn reply_of(
    reply: Result<Result<MessageWithParts, RuntimeError>, tokio::sync::oneshot::error::RecvError>,
    child: &SessionId,
) -> Result<MessageWithParts, ToolError> {
    match reply {
        Ok(Ok(message)) => Ok(message),
        Ok(Err(RuntimeError::Cancelled)) => Err(ToolError::Aborted),
        Ok(Err(e)) => Err(ToolError::Failed(format!(
            "subagent session {child} failed: {e}"
        ))),
        Err(_) => Err(ToolError::Failed(format!(
            "subagent session {child} stopped unexpectedly"
        ))),
    }
}

/// The summary of the child's tool parts in `answers`.
fn child_summary(answers: &[&MessageWithParts]) -> Vec<SummaryItem> {
    answers
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| {
            let t = p.as_tool()?;
            Some(SummaryItem::of(p.id.as_str(), &t.tool, &t.state))
        })
        .collect()
}

/// The child's own tokens and cost summed over `answers`; turns = how many there are.
pub(super) fn usage_of(answers: &[&MessageWithParts]) -> TaskUsage {
    let mut usage = TaskUsage::default();
    for answer in answers {
        if let Message::Assistant(a) = &*answer.info {
            usage.input += a.tokens.input;
            usage.output += a.tokens.output;
            usage.cache_read += a.tokens.cache.read;
            usage.cache_write += a.tokens.cache.write;
            usage.cost += a.cost;
            usage.turns += 1;
        }
    }
    usage
}

/// The texts and tool calls of `answers`, in order.
fn display_items(answers: &[&MessageWithParts]) -> Vec<DisplayItem> {
    answers
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.kind {
            PartKind::Text(t) if !t.text.is_empty() => Some(DisplayItem::Text {
                text: t.text.clone(),
            }),
            PartKind::Tool(t) => Some(DisplayItem::ToolCall {
                name: t.tool.clone(),
                args: t.state.input().clone(),
            }),
            _ => None,
        })
        .collect()
}
