//! The agent loop of one session: prompts in, steps until each is answered, answers out.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;

use taskforce_agents::id::SessionId;
use taskforce_agents::model::{AssistantError, Message};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::compaction::{CONTINUE, needs_compaction, pending_compaction, prune};
use super::crash::panic_text;
use super::input::{PartInput, PromptInput, create_user_message, hold_user_message};
use super::revert::{drop_reverted, patch_count, publish_session_diff};
use super::state::{LoopState, Run, load, lock};
use super::step::{StepOutcome, run_step};
use super::subtask::{pending_subtask, run_subtask};
use super::title::ensure_title;
use super::writer::{Held, Item, Writer};
use crate::RuntimeError;
use crate::bus::{Event, SessionStatus};
use crate::core::Core;
use crate::store::MessageWithParts;

/// A session's runs, as one task: the loop on the queued prompts, then another while prompts
/// came in after a loop's last look at the queue (a background result, say). A loop that
/// panics answers everyone with `Crashed` instead of leaving them waiting.
pub(crate) async fn run_loops(
    core: Arc<Core>,
    id: SessionId,
    state: Arc<Mutex<LoopState>>,
    mut token: CancellationToken,
) {
    loop {
        let run = AssertUnwindSafe(run_loop(core.clone(), id.clone(), state.clone(), token));
        if let Err(panic) = run.catch_unwind().await {
            tracing::error!(session = %id, "session loop crashed: {}", panic_text(&*panic));
            let waiters = {
                let mut state = lock(&state);
                state.end_run();
                state.queue.clear();
                std::mem::take(&mut state.waiters)
            };
            for w in waiters {
                let _ = w.send(Err(RuntimeError::Crashed(id.to_string())));
            }
            return;
        }
        // A run started by the actor meanwhile has the prompts.
        match lock(&state).next_run() {
            Some(next) => token = next,
            None => return,
        }
    }
}

/// Runs the loop until the model is done with every queued prompt, then answers the waiters.
async fn run_loop(
    core: Arc<Core>,
    id: SessionId,
    state: Arc<Mutex<LoopState>>,
    token: CancellationToken,
) {
    let writer = Writer::new(core.clone());
    let (session, mut messages, mut unsaved) = match load(&core, &id, &state).await {
        Ok(loaded) => loaded,
        Err(e) => {
            // Nothing can run here: every queued prompt hears why.
            lock(&state).queue.clear();
            return finish(&state, Err(e));
        }
    };
    // What a revert hid goes for good now that the session goes on.
    let session = match drop_reverted(&core, &state, session, &mut messages).await {
        Ok(s) => s,
        Err(e) => {
            lock(&state).queue.clear();
            return finish(&state, Err(e));
        }
    };
    if let Some(parent) = &session.parent_id {
        core.bus.register_parent(&session.id, parent);
    }
    let patches = patch_count(&messages);
    let depth = core.bus.depth_of(&session.id);
    let span = tracing::info_span!("session", id = %id, depth);
    writer.status(&session, SessionStatus::Busy);
    let mut intact = true;
    let result = async {
        loop {
            let mut held = Held::default();
            let run = Run {
                core: &core,
                writer: &writer,
                session: &session,
                state: &state,
                token: &token,
            };
            let result = drive(&run, &mut messages, &mut unsaved, &mut held).await;
            // The last step's end (or a user message no step took) has no commit to go with;
            // it is committed in the background, and the run's end waits for it.
            writer.flush_later(&mut held);
            if token.is_cancelled() {
                // Keep what the user sent while the loop was being cancelled.
                let leftover: Vec<PromptInput> = lock(&state).queue.drain(..).collect();
                for input in leftover {
                    let new = std::mem::take(&mut unsaved);
                    match create_user_message(&core, &writer, &session, Some(&messages), new, input)
                        .await
                    {
                        Ok(user) => messages.push(user),
                        Err(_) => {
                            intact = false;
                            break;
                        }
                    }
                }
                break Err(RuntimeError::Cancelled);
            }
            let more = {
                let state = lock(&state);
                result.is_ok() && !state.queue.is_empty()
            };
            if !more {
                break result;
            }
        }
    }
    .instrument(span)
    .await;
    // Everything the run queued is on disk and published before its end is heard of, and the
    // turn's end moves the session's time: at once, unless the session's own row is still
    // on its way (the time is moved on the stored row). A cancelled run does not wait for its
    // new time: like its final state (queued behind, published at once), the time is written
    // and published after the run reports idle, so that a cancelled tree goes idle without
    // waiting for a commit and a read at every level. A run that answers only the task call
    // that started it does not wait for the disk either: its last writes are handed to the
    // store at once, so that the call's own write of the answer lands after them and reads of
    // the session wait for them; their events, then idle, follow their commit, and the new
    // time is written and published on its own, as a cancelled run's is. The call goes on
    // meanwhile (a call from another node waits for the store to be flushed).
    let ended = taskforce_agents::id::now_ms();
    let mut handed_over = None;
    let settled = if writer.stores_a_session() {
        let settled = writer.settle().await;
        core.toucher.touch_and_wait(&session.id, ended).await;
        settled
    } else if token.is_cancelled() {
        core.toucher.touch(&session.id, ended);
        writer.settle().await
    } else if result.is_ok() && lock(&state).answers_only_its_call() {
        handed_over = writer.hand_over();
        core.toucher.touch(&session.id, ended);
        writer.failure().map_or(Ok(()), Err)
    } else {
        let touched = core.toucher.touch_and_wait(&session.id, ended);
        futures::join!(writer.settle(), touched).0
    };
    // A cancelled run's end that could not be stored leaves the memory ahead of the store.
    intact &= settled.is_ok();
    let result = match (result, settled) {
        (Ok(_), Err(e)) => Err(e.into()),
        (result, _) => result,
    };
    // The final message is copied only for the prompts waiting on it.
    let result = result.map(|i| {
        if lock(&state).waiters.is_empty() {
            MessageWithParts {
                info: messages[i].info.clone(),
                parts: Vec::new(),
            }
        } else {
            messages[i].clone()
        }
    });
    if let Err(e) = &result
        && !matches!(e, RuntimeError::Cancelled)
    {
        writer.publish_event(Event::SessionError {
            session_id: Some(session.id.clone()),
            error: Some(Box::new(AssistantError::unknown(e.to_string()))),
        });
    }
    // Old tool output is cleared once the turn is done (when `compaction.prune` is on).
    if core.config.compaction.prune && result.is_ok() {
        let changed = prune(&mut messages);
        if !changed.is_empty() {
            let parts: Vec<_> = changed
                .iter()
                .map(|&(m, p)| messages[m].parts[p].clone())
                .collect();
            let items: Vec<Item<'_>> = parts.iter().map(Item::Part).collect();
            if writer.save(&items).await.is_err() {
                intact = false;
            }
        }
    }
    if patch_count(&messages) != patches {
        publish_session_diff(core.clone(), session.clone(), messages.clone());
    }
    // What the loop holds is what the store holds, unless a write failed on the way.
    {
        let mut state = lock(&state);
        let consistent = intact && matches!(&result, Ok(_) | Err(RuntimeError::Cancelled));
        state.history = consistent.then_some(messages);
        state.unsaved = unsaved;
        state.behind = handed_over;
    }
    // A cancel that came through a parent's call (not this actor's mailbox) leaves no
    // permission ask of this session pending either.
    if token.is_cancelled() {
        core.broker.drop_session(&id);
        core.questions.drop_session(&id);
    }
    // Idle goes out before the waiters hear: a follower of this session's events has seen all
    // of them once it sees the idle.
    writer.status(&session, SessionStatus::Idle);
    finish(&state, result);
}

/// A runtime-made user message with `parts`, under the agent and model of the newest user
/// message.
fn follow_up(messages: &[MessageWithParts], parts: Vec<PartInput>) -> PromptInput {
    let last = messages.iter().rev().find_map(|m| m.info.as_user());
    PromptInput {
        parts,
        agent: last.map(|u| u.agent.clone()),
        model: last.map(|u| u.model.clone()),
        ..Default::default()
    }
}

/// Clears the running flag and answers every waiter with `result`, except those of prompts
/// still queued (they came in after the loop's last look; the actor starts the next loop on
/// them, which answers them).
fn finish(state: &Mutex<LoopState>, result: Result<MessageWithParts, RuntimeError>) {
    let mut waiters = {
        let mut state = lock(state);
        state.end_run();
        let answered = state.waiters.len().saturating_sub(state.queue.len());
        state.waiters.drain(..answered).collect::<Vec<_>>()
    };
    // The last waiter gets the result itself, the others copies.
    let last = waiters.pop();
    for w in waiters {
        let _ = w.send(result.clone());
    }
    if let Some(w) = last {
        let _ = w.send(result);
    }
}

/// Steps until the newest user message is answered; returns where the final assistant message
/// is in `messages`. User messages and each step's end are held for the next step's opening
/// commit (written first where something else comes next); what is still held when it returns
/// is the caller's to write.
async fn drive(
    run: &Run<'_>,
    messages: &mut Vec<MessageWithParts>,
    unsaved: &mut bool,
    held: &mut Held,
) -> Result<usize, RuntimeError> {
    let Run {
        core,
        writer,
        session,
        state,
        token,
    } = *run;
    let mut step = 0u32;
    let mut titled = false;
    loop {
        let queued: Vec<PromptInput> = lock(state).queue.drain(..).collect();
        for input in queued {
            let new = std::mem::take(unsaved);
            let user = hold_user_message(core, held, session, Some(messages), new, input).await?;
            messages.push(user);
        }
        if !titled {
            titled = true;
            ensure_title(core, session, messages);
        }
        if token.is_cancelled() {
            return Err(RuntimeError::Cancelled);
        }
        // A commit that failed behind the loop stops it: its state is not on disk.
        if let Some(e) = writer.failure() {
            return Err(e.into());
        }
        let last_user = messages
            .iter()
            .rposition(|m| matches!(*m.info, Message::User(_)));
        let last_assistant = messages
            .iter()
            .rposition(|m| matches!(*m.info, Message::Assistant(_)));
        let Some(user_index) = last_user else {
            return Err(RuntimeError::InvalidInput(
                "the session has no user message".into(),
            ));
        };
        if let Some(a) = last_assistant
            && a > user_index
            && let Message::Assistant(info) = &*messages[a].info
            && (info.is_finished() || info.error.is_some())
        {
            if lock(state).queue.is_empty() {
                return Ok(a);
            }
            continue;
        }
        // A compaction request waiting for its summary runs first.
        if let Some(auto) = pending_compaction(messages) {
            step += 1;
            let (summary, outcome) = run_step(run, messages, step, true, held).await?;
            // On disk and published before the compaction is announced.
            writer.flush(held).await?;
            let ok = summary
                .info
                .as_assistant()
                .is_some_and(|a| a.error.is_none() && a.is_finished());
            messages.push(summary);
            let summary = messages.len() - 1;
            if ok {
                writer.publish_event(Event::SessionCompacted {
                    session_id: session.id.clone(),
                });
            }
            if !ok || !auto || outcome == StepOutcome::Stop {
                if lock(state).queue.is_empty() {
                    return Ok(summary);
                }
                continue;
            }
            let next = follow_up(
                messages,
                vec![PartInput::Text {
                    text: CONTINUE.to_string(),
                    synthetic: true,
                }],
            );
            let new = std::mem::take(unsaved);
            let user = hold_user_message(core, held, session, Some(messages), new, next).await?;
            messages.push(user);
            continue;
        }
        // A step that overflowed the context is followed by an automatic compaction.
        if let Some(last) = messages.iter().rev().find(|m| {
            m.info
                .as_assistant()
                .is_some_and(|a| a.time.completed.is_some())
        }) && let Some(a) = last.info.as_assistant()
            && needs_compaction(core, last, &a.model())
        {
            let request = follow_up(messages, vec![PartInput::Compaction { auto: true }]);
            let new = std::mem::take(unsaved);
            let user = hold_user_message(core, held, session, Some(messages), new, request).await?;
            messages.push(user);
            continue;
        }
        // A subtask part waiting in the newest user messages runs before the model is called.
        if let Some(task) = pending_subtask(messages) {
            step += 1;
            writer.flush(held).await?;
            // Boxed: a subtask is rare, and its state would widen every turn's.
            let written =
                Box::pin(run_subtask(core, writer, session, messages, task, token)).await?;
            messages.extend(written);
            continue;
        }
        step += 1;
        let (answer, outcome) = run_step(run, messages, step, false, held).await?;
        messages.push(answer);
        if outcome == StepOutcome::Stop && lock(state).queue.is_empty() {
            return Ok(messages.len() - 1);
        }
    }
}
