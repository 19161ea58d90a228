//! The task tool's delegate: runs a subagent in a child session and reports on it live.

use std::sync::Arc;

use actix::Addr;
use async_trait::async_trait;
use indexmap::IndexMap;
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::{SessionId, now_ms};
use taskforce_agents::model::{Session, ToolMetadata};
use taskforce_agents::permission::{Action, Rule, compact, merge};
use taskforce_agents::tool::background::{ChildReport, ChildStatus};
use taskforce_agents::tool::{
    Delegate, SubagentOutcome, SubagentRequest, TaskError, TaskErrorCode, TaskFailure, ToolContext,
    ToolError,
};
use tokio_util::sync::CancellationToken;

use super::Subagents;
use super::admission::Lease;
use super::clock::{self, Activity};
use super::follow::Admitted;
use super::guard::is_within;
use crate::RuntimeError;
use crate::core::Core;
use crate::session::{PartInput, PromptInput, Seed, Subtask, SubtaskRun};
use crate::supervisor::{Activate, Places, Supervisor};

/// The name of the error an aborted assistant message carries.
pub(super) const ABORTED: &str = "MessageAbortedError";

/// Starts the child sessions of one session's task calls.
pub(crate) struct SubagentDelegate {
    pub(super) subagents: Arc<Subagents>,
    pub(super) core: Arc<Core>,
    /// The calling session.
    pub(super) parent: Arc<Session>,
}

impl SubagentDelegate {
    /// The delegate of `parent`'s task calls.
    pub(crate) fn new(subagents: Arc<Subagents>, parent: Arc<Session>) -> Self {
        SubagentDelegate {
            core: subagents.core.clone(),
            subagents,
            parent,
        }
    }

    /// The child session to run `request` in, whether it is new, and whether it may delegate.
    pub(super) async fn prepare_child(
        &self,
        caller: &AgentInfo,
        request: &SubagentRequest,
    ) -> Result<(Session, bool, bool), ToolError> {
        // The child sits one below its parent; it keeps the task tool while that is above the
        // limit (its own guard hides the tool once it is at the limit).
        let depth = self.subagents.session_depth(&self.parent).await + 1;
        let limits = &self.core.config.subagent;
        let nests = limits.enabled && depth < limits.max_depth;
        let (child, new) = self
            .child_session(&self.parent, caller, request, nests)
            .await?;
        Ok((child, new, nests))
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
        // Stored on the child: without the rules later ones override (same decisions, a
        // smaller row to write and read).
        let caller_rules = compact(merge(&[&caller.permission, parent.rules()]));
        // A background child this runtime runs may not be stored yet (its row goes to disk
        // with its first message): it is refused all the same, never taken for a new session.
        if let Some(raw) = &request.session_id
            && let Ok(id) = SessionId::parse(raw)
            && self.subagents.background.contains_key(&id)
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
            // Bounded by every caller's layers, added in one edit of the stored session so that
            // two callers continuing it at once both stay.
            if !existing.is_bound_by(&callers) {
                let edit = Box::new(move |s: &mut Session| s.bound_by(&callers));
                existing = store
                    .update_session(&id, edit)
                    .await
                    .map_err(failed)?
                    .ok_or_else(|| not_continuable(raw, "was deleted"))?;
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
        if is_within(&*self.core.store, &parent.id, &existing.id)
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

impl SubagentDelegate {
    /// Follows an admitted call's child and answers the lease back with the result. A root's
    /// calls are followed on the arbiters in turn, each beside its child (which starts on the
    /// arbiter its call runs on): the child's events reach the call on their own thread, and
    /// the root's arbiter is not left to follow every child alone. Other calls stay where they
    /// are (a nested tree keeps to one thread).
    async fn follow_placed(
        &self,
        ctx: &ToolContext,
        admitted: Admitted,
        clock: Option<Arc<Activity>>,
        mut lease: Lease,
    ) -> (Result<SubagentOutcome, ToolError>, Lease) {
        let places = &self.subagents.places;
        if self.parent.parent_id.is_none() && places.len() > 1 && !admitted.elsewhere {
            let place = match Places::here() {
                Some(own) => places.next_beside(own),
                None => places.next(),
            };
            if Places::here() != Some(place) {
                let delegate = SubagentDelegate::new(self.subagents.clone(), self.parent.clone());
                let ctx = ctx.clone();
                // Boxed where it is made: following a child is a large state machine, which
                // would otherwise be copied into every future that passes it on.
                let follow = Box::pin(async move {
                    let result = delegate
                        .follow_child(&ctx, admitted, clock.as_ref(), &mut lease)
                        .await;
                    (result, lease)
                });
                return places
                    .run_at(place, follow)
                    .await
                    .unwrap_or_else(|| (Err(failed(RuntimeError::Stopped)), Lease::default()));
            }
        }
        // Boxed too, so that this call's own state does not hold room for it.
        let result = Box::pin(self.follow_child(ctx, admitted, clock.as_ref(), &mut lease)).await;
        (result, lease)
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
impl Delegate for SubagentDelegate {
    async fn admit(&self, _ctx: &ToolContext) -> Result<(), TaskError> {
        match self.subagents.task_guard(&self.parent).await {
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
        // children never wait on it) and takes it back before it goes on. The call is let in
        // here, on the caller's thread, so that calls of one step queue in the order made.
        let clock = clock::clock_of(&self.subagents.clocks, &self.parent.id);
        let mut lease = Lease::default();
        let result = match self
            .admit_call(ctx, request, clock.as_ref(), &mut lease)
            .await
        {
            Ok(admitted) => {
                let (result, back) = self
                    .follow_placed(ctx, admitted, clock.clone(), lease)
                    .await;
                lease = back;
                result
            }
            Err(e) => Err(e),
        };
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

/// Starts `session`'s actor (a child of `parent`, on the arbiter at place `near` unless it
/// goes beside its parent) and gives it its task, the run a child of `within` (the parent's
/// call) when given; its reply comes when the run ends.
pub(super) async fn start_child(
    supervisor: &Addr<Supervisor>,
    session: Session,
    new: bool,
    parent: Option<&SessionId>,
    input: PromptInput,
    within: Option<CancellationToken>,
    near: Option<usize>,
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
            near,
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
