//! A failed model call: tried again after a wait while that may help (what the failed attempt
//! streamed removed first), else the answer's error.

use taskforce_agents::id::now_ms;
use taskforce_agents::model::{ApiError, AssistantError, CreatedTime, RetryPart};
use taskforce_agents::provider::ProviderError;

use super::part::SharedPart;
use super::turn::Turn;
use crate::bus::{Event, SessionStatus};

/// The longest wait between two attempts.
const MAX_RETRY_DELAY: std::time::Duration = std::time::Duration::from_secs(30);

/// What follows a failed attempt.
pub(super) enum Recovery {
    /// Try again: the attempt's parts are removed and the backoff waited.
    Retry,
    /// The turn was cancelled while waiting.
    Cancelled,
    /// No more tries: the failure is the answer's error.
    GiveUp,
}

/// The attempts at one model call: how many were retried, where the current one's parts begin.
#[derive(Default)]
pub(super) struct Attempts {
    retried: u32,
    start: usize,
}

impl Attempts {
    /// An attempt begins: its parts are those `turn` makes from now on.
    pub fn begin(&mut self, turn: &Turn) {
        self.start = turn.parts.len();
    }

    /// What follows the attempt's failure with `error`, `calls_started` telling whether a tool
    /// call of the turn has started. A call cut before any tool ran is retried from the start:
    /// what it streamed is removed (stored and shown once, by the attempt that succeeds), and a
    /// retry part says why it was cut.
    pub async fn after_failure(
        &mut self,
        turn: &mut Turn,
        error: &ProviderError,
        calls_started: bool,
    ) -> Recovery {
        if !self.may_retry(turn, error, calls_started) {
            return Recovery::GiveUp;
        }
        discard_from(turn, self.start).await;
        match self.retry(turn, error).await {
            Ok(()) => Recovery::Retry,
            Err(()) => Recovery::Cancelled,
        }
    }

    /// Whether a failed call may be tried again: the error is retryable, no tool of this step
    /// has started, and the provider's `max_retries` is not used up.
    fn may_retry(&self, turn: &Turn, error: &ProviderError, calls_started: bool) -> bool {
        let max = turn.core.config.max_retries(&turn.model.provider_id);
        error.is_retryable() && !calls_started && self.retried < max
    }

    /// Records a retry part, shows the retry status, and waits the backoff (2 s doubling, at
    /// most 30 s, or what `retry-after` asked for); `Err` when cancelled while waiting.
    async fn retry(&mut self, turn: &mut Turn, error: &ProviderError) -> Result<(), ()> {
        self.retried += 1;
        let attempt = self.retried;
        let delay = match error {
            ProviderError::Http {
                retry_after: Some(after),
                ..
            } => *after,
            _ => turn
                .core
                .retry_base
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(MAX_RETRY_DELAY),
        };
        let mut api = ApiError::new(error.to_string(), true);
        if let ProviderError::Http { status, body, .. } = error {
            api = api.with_status(*status);
            api.response_body = Some(body.clone());
        }
        let retry = turn.new_part(
            RetryPart {
                attempt,
                error: api,
                time: CreatedTime { created: now_ms() },
            }
            .into(),
        );
        let _ = turn.writer.part(&retry.lock()).await;
        let next = now_ms().saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        turn.writer.status(
            &turn.session,
            SessionStatus::Retry {
                attempt,
                message: error.to_string(),
                next,
            },
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {
                turn.writer.status(&turn.session, SessionStatus::Busy);
                Ok(())
            }
            () = turn.token.cancelled() => Err(()),
        }
    }
}

/// Removes the parts from `start` on (a failed attempt's): from the store, after any queued
/// write of them, and from the bus's listeners with `message.part.removed`.
async fn discard_from(turn: &mut Turn, start: usize) {
    let parts: Vec<SharedPart> = turn.parts.drain(start.min(turn.parts.len())..).collect();
    // The writes of them still on their way to the store go first.
    if let Err(error) = turn.writer.settle().await {
        tracing::warn!(%error, "a failed attempt's parts may not all be stored");
    }
    for part in parts {
        let part = part.lock();
        if let Err(error) = turn.core.store.remove_part(&part.id).await {
            tracing::warn!(%error, part = %part.id, "a failed attempt's part was not removed");
        }
        turn.writer.publish_event(Event::PartRemoved {
            session_id: part.session_id.clone(),
            message_id: part.message_id.clone(),
            part_id: part.id.clone(),
        });
    }
}

/// A provider error as OpenCode's assistant error.
pub(crate) fn to_assistant_error(error: &ProviderError) -> AssistantError {
    match error {
        ProviderError::Auth { provider, message } => {
            AssistantError::provider_auth(provider.clone(), message.clone())
        }
        ProviderError::ContextOverflow { message } => {
            AssistantError::context_overflow(message.clone())
        }
        ProviderError::Http { status, body, .. } => {
            let mut api =
                ApiError::new(error.to_string(), error.is_retryable()).with_status(*status);
            api.response_body = Some(body.clone());
            AssistantError::from(api)
        }
        ProviderError::ModelNotFound(_)
        | ProviderError::UnknownProvider { .. }
        | ProviderError::MissingKey { .. }
        | ProviderError::Config { .. } => AssistantError::unknown(error.to_string()),
        _ => AssistantError::from(ApiError::new(error.to_string(), error.is_retryable())),
    }
}
