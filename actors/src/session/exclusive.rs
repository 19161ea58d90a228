//! Work a session does outside its agent loop but with the session to itself: a user's shell
//! command and a message stored without a reply (`noReply`).

use std::sync::{Arc, Mutex};

use taskforce_agents::id::SessionId;
use tokio_util::sync::CancellationToken;

use super::input::{PromptInput, create_user_message};
use super::revert::drop_reverted;
use super::shell::{ShellInput, run_shell};
use super::state::{LoopState, load, lock};
use super::writer::Writer;
use crate::RuntimeError;
use crate::bus::SessionStatus;
use crate::core::Core;
use crate::store::MessageWithParts;

/// What to run with the session to itself.
#[derive(Debug, Clone)]
pub(crate) enum Job {
    /// Run a shell command for the user and record it as a bash tool call.
    Shell(ShellInput),
    /// Store a user message without running the agent loop.
    Message(PromptInput),
}

/// Runs `job` and puts the session's history back; answers the message it wrote.
pub(crate) async fn run_job(
    core: Arc<Core>,
    id: SessionId,
    state: Arc<Mutex<LoopState>>,
    token: CancellationToken,
    job: Job,
) -> Result<MessageWithParts, RuntimeError> {
    let writer = Writer::new(core.clone());
    let (session, mut messages, mut unsaved) = load(&core, &id, &state).await?;
    let session = drop_reverted(&core, &state, session, &mut messages).await?;
    let result = match job {
        Job::Message(input) => {
            let new = std::mem::take(&mut unsaved);
            create_user_message(&core, &writer, &session, Some(&messages), new, input)
                .await
                .inspect(|user| messages.push(user.clone()))
        }
        Job::Shell(input) => {
            writer.status(&session, SessionStatus::Busy);
            let ran = run_shell(
                &core,
                &writer,
                &session,
                &mut messages,
                &mut unsaved,
                input,
                &token,
            )
            .await;
            writer.status(&session, SessionStatus::Idle);
            ran
        }
    };
    let mut state = lock(&state);
    state.history = result.is_ok().then_some(messages);
    state.unsaved = unsaved;
    result
}
