//! The session actor: one per live session, its mailbox takes prompts, subtasks and cancels.
//!
//! A prompt is queued and, when no loop runs, starts the agent loop as a spawned task holding a
//! cancellation token; the mailbox stays free so `Cancel` is handled at once. Prompts that
//! arrive while the loop runs are picked up by it and answered when it ends — or, when it is
//! cancelled, answered with the cancellation error. An actor with nothing to do stops itself
//! after an idle period; the supervisor starts it again from the store on the next message.

use std::sync::{Arc, Mutex};

use actix::prelude::*;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Part, Session};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::exclusive::{Job, run_job};
use super::input::PromptInput;
use super::part_edit::{PartEdit, run_part_edit};
use super::relay::spawn_relay;
use super::release::HandedOver;
use super::revert::{Undo, run_undo};
use super::run::run_loops;
use super::state::{LoopState, lock};
use crate::RuntimeError;
use crate::core::Core;
use crate::store::MessageWithParts;

/// The answer to a prompt: the final assistant message, or why there is none.
pub(crate) type Reply = oneshot::Receiver<Result<MessageWithParts, RuntimeError>>;

/// What a session actor can be started with so that its loop reads nothing.
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    /// The session.
    pub session: Session,
    /// It has no messages yet.
    pub empty: bool,
    /// It is not stored yet: its row goes to disk with its first message (new children).
    pub unsaved: bool,
}

/// One live session.
pub(crate) struct SessionActor {
    id: SessionId,
    core: Arc<Core>,
    state: Arc<Mutex<LoopState>>,
}

/// A look at a session actor's running loop from outside the actor (the supervisor's).
#[derive(Clone)]
pub(crate) struct RunHandle(Arc<Mutex<LoopState>>);

impl RunHandle {
    /// The memory of a new actor, from what it is started with.
    pub(crate) fn new(seed: Option<Seed>) -> Self {
        let mut state = LoopState {
            idle_since: Some(tokio::time::Instant::now()),
            ..LoopState::default()
        };
        if let Some(seed) = seed {
            state.history = seed.empty.then(Vec::new);
            state.unsaved = seed.unsaved;
            state.session = Some(Arc::new(seed.session));
        }
        RunHandle(Arc::new(Mutex::new(state)))
    }

    /// Takes in `session`'s caller bounds when they differ from what the actor remembers (a
    /// continued child bounded by one more caller): its next step is asked against them.
    pub(crate) fn rebound(&self, session: &Session) {
        let mut state = lock(&self.0);
        if let Some(known) = &state.session
            && known.caller_permission != session.caller_permission
        {
            let mut updated = (**known).clone();
            updated.caller_permission = session.caller_permission.clone();
            state.session = Some(Arc::new(updated));
        }
    }

    /// Both handles are of one actor's memory.
    pub(crate) fn same(&self, other: &RunHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A loop runs that a cancel of a subtree does not reach by itself: its token is not
    /// cancelled, and it is not tied to a call of a session `in_tree` (such a loop ends with the
    /// call, by its token or its relay; one tied to a call from outside the subtree does not).
    pub(crate) fn runs_unreached(&self, in_tree: impl Fn(&SessionId) -> bool) -> bool {
        let state = lock(&self.0);
        let reached = state.tied_to.as_ref().is_some_and(in_tree);
        !reached && state.running.as_ref().is_some_and(|t| !t.is_cancelled())
    }
}

impl SessionActor {
    /// The actor of session `id`, with the memory `run` (which the supervisor keeps a handle
    /// of).
    pub(crate) fn new(id: SessionId, core: Arc<Core>, run: RunHandle) -> Self {
        SessionActor {
            id,
            core,
            state: run.0,
        }
    }

    /// Cancels the running loop and rejects the session's pending asks; answers whether a loop
    /// was running.
    fn cancel(&self) -> bool {
        let token = lock(&self.state).running.clone();
        self.core.broker.drop_session(&self.id);
        self.core.questions.drop_session(&self.id);
        match token {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Queues a prompt and starts the loop if none runs; a new loop is tied to a parent's call
    /// when `tie` is given (cancelling the call cancels it): its token is a child of the call's,
    /// or, when the call runs on another thread, its own token that a task on this thread
    /// cancels after the call's. Answers the prompt's reply and whether the loop is tied to the
    /// call.
    fn enqueue(&mut self, input: PromptInput, tie: Option<Tie<'_>>) -> (Reply, bool) {
        let (tx, rx) = oneshot::channel();
        let (new_run, tied) = {
            let mut state = lock(&self.state);
            state.queue.push_back(input);
            state.waiters.push(tx);
            match &state.running {
                Some(_) => (None, false),
                None => {
                    let tied = tie.is_some();
                    let token = match tie {
                        None => CancellationToken::new(),
                        Some(tie) => {
                            state.tied_to = tie.parent;
                            if tie.relay {
                                let token = CancellationToken::new();
                                state.relay = Some(spawn_relay(tie.within.clone(), token.clone()));
                                token
                            } else {
                                tie.within.child_token()
                            }
                        }
                    };
                    state.running = Some(token.clone());
                    (Some(token), tied)
                }
            }
        };
        if let Some(token) = new_run {
            self.start_loop(token);
        }
        (rx, tied)
    }

    /// Runs the agent loop under `token` (already set as the running one), in a task of its
    /// own that the actor does not wait on: the task ends its runs itself (see `run_loops`),
    /// so a session's end wakes nothing else on its thread.
    fn start_loop(&mut self, token: CancellationToken) {
        // Boxed: the task's cell then holds a pointer, not the loop's whole state machine,
        // which tokio would otherwise copy when the loop ends.
        tokio::spawn(Box::pin(run_loops(
            self.core.clone(),
            self.id.clone(),
            self.state.clone(),
            token,
        )));
    }

    /// Runs `job` with the session to itself, or fails with `Busy` while a loop runs. Prompts
    /// that arrive meanwhile wait and start the loop when the job ends.
    fn exclusive<T, F>(
        &mut self,
        ctx: &mut Context<Self>,
        work: impl FnOnce(CancellationToken) -> F,
    ) -> Result<oneshot::Receiver<Result<T, RuntimeError>>, RuntimeError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, RuntimeError>> + Send + 'static,
    {
        let token = {
            let mut state = lock(&self.state);
            if state.running.is_some() {
                return Err(RuntimeError::Busy(self.id.to_string()));
            }
            let token = CancellationToken::new();
            state.running = Some(token.clone());
            token
        };
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(work(token));
        ctx.spawn(task.into_actor(self).map(move |joined, act, _| {
            let result = joined.unwrap_or_else(|e| {
                tracing::error!(session = %act.id, "session job crashed: {e}");
                Err(RuntimeError::Crashed(act.id.to_string()))
            });
            let _ = tx.send(result);
            let next = {
                let mut state = lock(&act.state);
                state.end_run();
                state.next_run()
            };
            if let Some(token) = next {
                act.start_loop(token);
            }
        }));
        Ok(rx)
    }

    /// Checks after `after` whether the actor has been idle for `idle_stop` and stops it if so;
    /// otherwise checks again when that could be (a full period while a run goes on). One
    /// timer per actor and period: runs do not arm timers.
    fn check_idle_after(&mut self, after: std::time::Duration, ctx: &mut Context<Self>) {
        ctx.run_later(after, |act, ctx| {
            let left = {
                let state = lock(&act.state);
                let idle_for = state
                    .idle_since
                    .map_or(std::time::Duration::ZERO, |since| since.elapsed());
                idle_left(state.running.is_some(), idle_for, act.core.idle_stop)
            };
            match left {
                Some(left) => act.check_idle_after(left, ctx),
                None => ctx.stop(),
            }
        });
    }
}

/// How much longer an actor must wait before it may stop: a full `period` while a run goes on,
/// what is left of the period since its last run ended otherwise; `None` when it may stop now.
fn idle_left(
    running: bool,
    idle_for: std::time::Duration,
    period: std::time::Duration,
) -> Option<std::time::Duration> {
    if running {
        return Some(period);
    }
    period.checked_sub(idle_for).filter(|left| !left.is_zero())
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.check_idle_after(self.core.idle_stop, ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some(children) = self.core.children() {
            children.stopped(&self.id);
        }
    }
}

/// Run the agent loop on a user prompt.
#[derive(Message)]
#[rtype(result = "Result<Reply, RuntimeError>")]
pub(crate) struct Prompt {
    /// The prompt.
    pub input: PromptInput,
}

impl Handler<Prompt> for SessionActor {
    type Result = Result<Reply, RuntimeError>;

    fn handle(&mut self, msg: Prompt, _: &mut Self::Context) -> Self::Result {
        Ok(self.enqueue(msg.input, None).0)
    }
}

/// Run the agent loop on a task delegated by the parent session.
#[derive(Message)]
#[rtype(result = "Result<SubtaskRun, RuntimeError>")]
pub(crate) struct Subtask {
    /// The delegated task as a prompt (agent, model and the child's tool switches set).
    pub input: PromptInput,
    /// The parent's call: cancelling it cancels the run this task starts (a run already going
    /// keeps its own token).
    pub within: Option<CancellationToken>,
    /// The thread `within` is cancelled on (the parent's arbiter), when known: a child on
    /// another thread relays the cancel, so that each arbiter cancels its own sessions' tokens
    /// and wakes its own tasks.
    pub caller: Option<std::thread::ThreadId>,
    /// The session whose call sends the task: a cancel of a subtree holding it reaches the run
    /// through the call.
    pub parent: Option<SessionId>,
}

/// What ties a new loop to a parent's task call.
struct Tie<'a> {
    /// The call's token.
    within: &'a CancellationToken,
    /// The call runs on another thread: its cancel is relayed.
    relay: bool,
    /// The calling session.
    parent: Option<SessionId>,
}

/// A delegated task under way in its session.
pub(crate) struct SubtaskRun {
    /// Answered when the run ends.
    pub reply: Reply,
    /// The run was started for this task and ends with the call (`within`); otherwise it was
    /// already going and keeps its own token.
    pub tied: bool,
    /// The session's answers, readable once the run has ended.
    pub answers: AnswerBook,
}

impl Handler<Subtask> for SessionActor {
    type Result = Result<SubtaskRun, RuntimeError>;

    fn handle(&mut self, msg: Subtask, _: &mut Self::Context) -> Self::Result {
        let relay = msg
            .caller
            .is_some_and(|caller| caller != std::thread::current().id());
        let tie = msg.within.as_ref().map(|within| Tie {
            within,
            relay,
            parent: msg.parent,
        });
        let (reply, tied) = self.enqueue(msg.input, tie);
        Ok(SubtaskRun {
            reply,
            tied,
            answers: AnswerBook(self.state.clone()),
        })
    }
}

/// Reads a session's answers from its actor's memory without a message to the actor.
#[derive(Clone)]
pub(crate) struct AnswerBook(Arc<Mutex<LoopState>>);

impl AnswerBook {
    /// A book that remembers nothing: its session runs elsewhere (its answers are read from
    /// the store).
    pub fn unknown() -> Self {
        AnswerBook(Arc::default())
    }

    /// What `read` makes of the session's answers (assistant messages) created at or after
    /// `since` (epoch ms), as the actor remembers them (what the store holds, or will once its
    /// queued writes land), when no loop runs and the actor remembers them.
    pub fn read<R>(&self, since: u64, read: impl FnOnce(Vec<&MessageWithParts>) -> R) -> Option<R> {
        let state = lock(&self.0);
        // Nor when the last run's end, handed to the store, could not be stored.
        if state.running.is_some() || state.behind.as_ref().is_some_and(HandedOver::failed) {
            return None;
        }
        let history = state.history.as_ref()?;
        Some(read(
            history
                .iter()
                .filter(|m| m.is_answer_since(since))
                .collect(),
        ))
    }
}

/// Cancel the running loop; answers whether one was running.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct Cancel;

impl Handler<Cancel> for SessionActor {
    type Result = bool;

    fn handle(&mut self, _: Cancel, _: &mut Self::Context) -> bool {
        self.cancel()
    }
}

/// Stop the actor now (its session was deleted); a running loop is cancelled first.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Shutdown;

impl Handler<Shutdown> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: Shutdown, ctx: &mut Self::Context) {
        if let Some(token) = lock(&self.state).running.clone() {
            token.cancel();
        }
        ctx.stop();
    }
}

/// Run work that needs the session to itself: a user's shell command, or a message that wants
/// no reply. Fails with `Busy` while the loop runs.
#[derive(Message)]
#[rtype(result = "Result<Reply, RuntimeError>")]
pub(crate) struct Exclusive(pub Job);

impl Handler<Exclusive> for SessionActor {
    type Result = Result<Reply, RuntimeError>;

    fn handle(&mut self, msg: Exclusive, ctx: &mut Self::Context) -> Self::Result {
        let (core, id, state) = (self.core.clone(), self.id.clone(), self.state.clone());
        self.exclusive(ctx, |token| run_job(core, id, state, token, msg.0))
    }
}

/// Remove or replace a stored part. Fails with `Busy` while the loop runs.
#[derive(Message)]
#[rtype(result = "Result<oneshot::Receiver<Result<Option<Part>, RuntimeError>>, RuntimeError>")]
pub(crate) struct EditPart(pub PartEdit);

impl Handler<EditPart> for SessionActor {
    type Result = Result<oneshot::Receiver<Result<Option<Part>, RuntimeError>>, RuntimeError>;

    fn handle(&mut self, msg: EditPart, ctx: &mut Self::Context) -> Self::Result {
        let (core, id, state) = (self.core.clone(), self.id.clone(), self.state.clone());
        self.exclusive(ctx, |_| run_part_edit(core, id, state, msg.0))
    }
}

/// Undo or redo turns of the session. Fails with `Busy` while the loop runs.
#[derive(Message)]
#[rtype(result = "Result<oneshot::Receiver<Result<Session, RuntimeError>>, RuntimeError>")]
pub(crate) struct UndoTurns(pub Undo);

impl Handler<UndoTurns> for SessionActor {
    type Result = Result<oneshot::Receiver<Result<Session, RuntimeError>>, RuntimeError>;

    fn handle(&mut self, msg: UndoTurns, ctx: &mut Self::Context) -> Self::Result {
        let (core, id, state) = (self.core.clone(), self.id.clone(), self.state.clone());
        self.exclusive(ctx, |_| run_undo(core, id, state, msg.0))
    }
}

/// Whether the loop is running.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct IsBusy;

impl Handler<IsBusy> for SessionActor {
    type Result = bool;

    fn handle(&mut self, _: IsBusy, _: &mut Self::Context) -> bool {
        lock(&self.state).running.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actor_stops_only_after_a_full_idle_period_since_its_last_run() {
        use std::time::Duration;
        let period = Duration::from_millis(1_000);
        // Busy when the timer fires (it was armed before a run that is still going): a full
        // period more, however long ago the timer was armed.
        assert_eq!(idle_left(true, Duration::ZERO, period), Some(period));
        // Its last run ended 400 ms ago: it waits out the other 600 ms, not a new period.
        assert_eq!(
            idle_left(false, Duration::from_millis(400), period),
            Some(Duration::from_millis(600))
        );
        // Idle for the whole period, or longer: it stops now.
        assert_eq!(idle_left(false, period, period), None);
        assert_eq!(idle_left(false, Duration::from_secs(5), period), None);
    }
}
