//! A session's state while its actor lives: the queued prompts and their waiters, the running
//! loop's token, and the actor's memory of its session; and what one run of the loop works with.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::Session;
use taskforce_agents::permission::Layers;
use taskforce_agents::provider::ToolSpec;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::input::PromptInput;
use super::recover::{has_unfinished, repair_dead_runs};
use super::release::HandedOver;
use super::writer::Writer;
use crate::RuntimeError;
use crate::core::Core;
use crate::store::MessageWithParts;

/// Queued prompts, their waiters, the running loop's token, and the actor's memory of its
/// session. The actor is the only writer of its session's messages, so what it remembers is
/// what the store holds; after a failed loop the history is dropped and read again.
#[derive(Default)]
pub(crate) struct LoopState {
    /// The session.
    pub session: Option<Arc<Session>>,
    /// The session's messages as stored, when known.
    pub history: Option<Vec<MessageWithParts>>,
    /// The session row is not stored yet.
    pub unsaved: bool,
    /// The last run's end, when it was handed to the store without waiting for its commit:
    /// should it not be stored, the history above is ahead of the store and is read again.
    pub behind: Option<HandedOver>,
    pub queue: VecDeque<PromptInput>,
    pub waiters: Vec<oneshot::Sender<Result<MessageWithParts, RuntimeError>>>,
    pub running: Option<CancellationToken>,
    /// Since when no loop or job has run: when the last ended, else when the actor's memory
    /// was made.
    pub idle_since: Option<tokio::time::Instant>,
    /// The session whose task call the running loop was started by, when known: the loop ends
    /// with that call (its token is a child of the call's, or relayed from it).
    pub tied_to: Option<SessionId>,
    /// The task relaying the parent's call's cancel to the running loop, when the call runs
    /// on another arbiter.
    pub relay: Option<tokio::task::AbortHandle>,
    /// The rules the last step ran under: kept across steps and loops while neither the agent
    /// nor the session changes.
    pub rules: Option<MergedRules>,
    /// The tools the last step offered, as the model is told of them: kept while neither the
    /// agent nor the offered tools change, so that a step's request shares them.
    pub specs: Option<OfferedTools>,
    /// The tools a prompt's steps are offered before any guard: kept while the prompt, its
    /// rules and the MCP tools stay.
    pub visible: Option<VisibleTools>,
    /// The environment block of a prompt's system prompt, made at its first step.
    pub environment: Option<(MessageId, String)>,
}

/// The tools a prompt's rules leave visible (their places; see `Core::tool`).
pub(crate) struct VisibleTools {
    /// The user message whose steps they are for (its tool switches count).
    pub prompt: MessageId,
    pub rules: Layers,
    pub mcp: Arc<[Arc<dyn taskforce_agents::tool::Tool>]>,
    pub tools: Arc<[usize]>,
}

/// The tool specs offered to an agent's model.
pub(crate) struct OfferedTools {
    pub agent: Arc<AgentInfo>,
    /// Their places among the built-in tools, then `mcp` (see `Core::tool`).
    pub tools: Vec<usize>,
    /// The MCP tools the places count in.
    pub mcp: Arc<[Arc<dyn taskforce_agents::tool::Tool>]>,
    pub specs: Arc<Vec<ToolSpec>>,
}

/// An agent's and a session's rules, merged, over the session's callers' rules.
pub(crate) struct MergedRules {
    pub agent: Arc<AgentInfo>,
    pub session: Arc<Session>,
    pub rules: Layers,
}

impl LoopState {
    /// The running loop is over: no token, no tie to a parent's call, no relay.
    pub(crate) fn end_run(&mut self) {
        self.running = None;
        self.idle_since = Some(tokio::time::Instant::now());
        self.tied_to = None;
        if let Some(relay) = self.relay.take() {
            relay.abort();
        }
    }

    /// Whether the running loop answers only the task call that started it: it is tied to a
    /// parent's call and no other prompt waits on its end.
    pub(crate) fn answers_only_its_call(&self) -> bool {
        self.tied_to.is_some() && self.waiters.len().saturating_sub(self.queue.len()) == 1
    }

    /// When no run goes on and prompts wait: a new run's token, set as the running one.
    pub(crate) fn next_run(&mut self) -> Option<CancellationToken> {
        if self.running.is_some() || self.queue.is_empty() {
            return None;
        }
        let token = CancellationToken::new();
        self.running = Some(token.clone());
        Some(token)
    }
}

/// Locks the loop state, tolerating a poisoned lock (its data stays consistent).
pub(crate) fn lock(state: &Mutex<LoopState>) -> MutexGuard<'_, LoopState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one run of a session's loop works with: the session, the actor's memory of it, where
/// its state is written and what cancels the run.
pub(super) struct Run<'a> {
    pub core: &'a Arc<Core>,
    pub writer: &'a Writer,
    pub session: &'a Arc<Session>,
    pub state: &'a Mutex<LoopState>,
    pub token: &'a CancellationToken,
}

/// The session, its history and whether its row is unsaved: from the actor's memory (the history
/// is taken out; the caller puts it back when done), else from the store.
pub(crate) async fn load(
    core: &Arc<Core>,
    id: &SessionId,
    state: &Mutex<LoopState>,
) -> Result<(Arc<Session>, Vec<MessageWithParts>, bool), RuntimeError> {
    let (known, mut remembered, unsaved, behind) = {
        let mut state = lock(state);
        (
            state.session.clone(),
            state.history.take(),
            std::mem::take(&mut state.unsaved),
            state.behind.take(),
        )
    };
    // The last run's end, if it did not wait for its commit, is on disk first; if it could
    // not be stored, the store is read instead of the memory.
    if let Some(behind) = behind
        && !behind.stored().await
    {
        remembered = None;
    }
    let session = match known {
        Some(s) => s,
        None => match core.store.session(id).await? {
            Some(s) => {
                let s = Arc::new(s);
                lock(state).session = Some(s.clone());
                s
            }
            None => return Err(RuntimeError::SessionNotFound(id.to_string())),
        },
    };
    let messages = match remembered {
        Some(h) => h,
        None => {
            let stored = core.store.messages(id).await?;
            // An answer left unfinished by a runtime that died is ended before the loop
            // builds on it.
            if has_unfinished(&stored) && !repair_dead_runs(core, Some(id)).await.is_empty() {
                core.store.messages(id).await?
            } else {
                stored
            }
        }
    };
    Ok((session, messages, unsaved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::relay::spawn_relay;

    #[tokio::test]
    async fn an_ended_run_stops_its_relay() {
        let upstream = CancellationToken::new();
        let token = CancellationToken::new();
        let mut state = LoopState {
            running: Some(token.clone()),
            tied_to: Some(SessionId::new()),
            relay: Some(spawn_relay(upstream.clone(), token.clone())),
            ..LoopState::default()
        };
        state.end_run();
        assert!(state.running.is_none() && state.tied_to.is_none() && state.relay.is_none());
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        upstream.cancel();
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        assert!(!token.is_cancelled(), "an ended run's token is left alone");
    }
}
