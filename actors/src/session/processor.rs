//! Turning one model stream into parts: the answer's text and reasoning as they stream, its
//! tool calls as the model names them, and its closing state once the stream is over.

use std::sync::Arc;
use tokio::time::Instant;

use futures::StreamExt;
use taskforce_agents::model::{
    AssistantError, CacheTokens, Message, Part, StepFinishPart, StepStartPart, Tokens,
};
use taskforce_agents::provider::{
    FinishReason, LanguageModel, ModelEvent, ModelRequest, ProviderError, Usage, cost,
};

use super::dispatch::ToolCalls;
use super::part::SharedPart;
use super::retry::{Attempts, Recovery, to_assistant_error};
use super::streaming::Streaming;
use super::turn::Turn;
use super::writer::Item;

/// Token counts of a model call as OpenCode's message tokens.
pub(super) fn tokens(usage: &Usage) -> Tokens {
    Tokens {
        total: Some(usage.input + usage.output + usage.cache_read + usage.cache_write),
        input: usage.input,
        output: usage.output,
        reasoning: usage.reasoning,
        cache: CacheTokens {
            read: usage.cache_read,
            write: usage.cache_write,
        },
    }
}

/// What one model call produced.
#[derive(Default)]
pub(super) struct StepResult {
    pub usage: Usage,
    pub finish: Option<FinishReason>,
    pub error: Option<AssistantError>,
    /// A permission was rejected: the loop stops.
    pub blocked: bool,
    /// Finished parts not yet written: ended text and reasoning, then the step's closing part.
    pub closing: Vec<Arc<Part>>,
}

/// Turns one model stream into parts and runs its tool calls.
pub(super) struct Processor {
    /// The answer and what it is made with.
    pub turn: Turn,
    /// Its tool calls.
    pub calls: ToolCalls,
}

/// The text and reasoning parts being streamed.
#[derive(Default)]
struct Live {
    text: Option<Streaming>,
    reasoning: Option<Streaming>,
}

/// How an attempt at the model call ended.
enum Ended {
    /// The stream is over.
    Done,
    /// The turn was cancelled.
    Cancelled,
    /// The call failed, or its stream broke off.
    Failed(ProviderError),
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Processor {
    pub async fn process(
        &mut self,
        model: &dyn LanguageModel,
        request: ModelRequest,
        opening: Arc<Message>,
    ) -> StepResult {
        let mut result = StepResult::default();
        // The answer's first state and its step-start part, in one commit, which the model
        // call does not wait for (a tool call does: see `ToolCalls::start`).
        let start = self.turn.new_part(StepStartPart::default().into());
        self.turn.writer.save_later_after(
            &mut self.turn.held,
            &[Item::Message(&opening), Item::Part(&start.lock())],
        );
        drop(opening);
        let mut live = Live::default();
        let mut aborted_now = false;
        let mut attempts = Attempts::default();
        loop {
            attempts.begin(&self.turn);
            let error = match self.attempt(model, &request, &mut live, &mut result).await {
                Ended::Done => break,
                Ended::Cancelled => {
                    aborted_now = true;
                    break;
                }
                Ended::Failed(error) => error,
            };
            match attempts
                .after_failure(&mut self.turn, &error, self.calls.started())
                .await
            {
                Recovery::Retry => {
                    live = Live::default();
                    self.calls.forget();
                }
                Recovery::Cancelled => {
                    aborted_now = true;
                    break;
                }
                Recovery::GiveUp => {
                    result.error = Some(to_assistant_error(&error));
                    break;
                }
            }
        }
        // Finished text is written with the step's closing commit.
        result.closing.extend(Streaming::end(live.reasoning));
        result.closing.extend(Streaming::end(live.text));

        // Wait for the step's tool calls. Calls that end together are written in one commit;
        // those that end last, once the stream is over, are written with the closing commit
        // (and what they leave pending with it), ahead of the finished text as they would have
        // been.
        let mut last: Vec<Arc<Part>> = Vec::new();
        result.blocked = self.calls.wait(&self.turn, &mut last).await;
        if aborted_now || self.turn.token.is_cancelled() {
            result.error = Some(aborted());
        }
        // Nothing stays pending or running.
        self.calls.end_unfinished(&self.turn, &mut last).await;
        result.closing.splice(0..0, last);
        // What the step's calls changed in the worktree, even when the step failed or was
        // cancelled: undoing the turn must find it.
        // Boxed, and only when a snapshot was taken: most steps change no file, and its state
        // would widen every step's.
        if self.calls.snapshot.taken()
            && let Some(patch) = Box::pin(self.calls.snapshot.patch(&self.turn)).await
        {
            let patch = SharedPart::new(patch);
            self.turn.parts.push(patch.clone());
            result.closing.push(patch.lock());
        }
        // A step that failed or was cancelled never finished: like OpenCode, it gets no
        // `step-finish` part (its usage is on the assistant message).
        if result.error.is_some() {
            return result;
        }
        if result.finish.is_none() {
            result.finish = Some(FinishReason::Other("unknown".into()));
        }
        let reason = result
            .finish
            .as_ref()
            .map_or("unknown", |f| f.as_str())
            .to_string();
        let price = self
            .turn
            .core
            .providers
            .model_config(&self.turn.model)
            .and_then(|m| m.cost.as_ref());
        let finish = self.turn.new_part(
            StepFinishPart::new(reason, cost(&result.usage, price), tokens(&result.usage)).into(),
        );
        // Written with the assistant message's final state, in one commit.
        result.closing.push(finish.lock());
        result
    }

    /// One attempt at the model call: its stream read to the end, unless it fails or the turn
    /// is cancelled.
    async fn attempt(
        &mut self,
        model: &dyn LanguageModel,
        request: &ModelRequest,
        live: &mut Live,
        result: &mut StepResult,
    ) -> Ended {
        let stream = tokio::select! {
            s = model.stream(request) => s,
            () = self.turn.token.cancelled() => return Ended::Cancelled,
        };
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => return Ended::Failed(e),
        };
        loop {
            // Text of a stream that pauses is written (and published whole) once it is due,
            // not only at the next delta: what a stalled or killed call said so far is on disk
            // and shown.
            let every = self.turn.core.flush_every;
            let due = [
                Streaming::due(&live.text, every),
                Streaming::due(&live.reasoning, every),
            ]
            .into_iter()
            .flatten()
            .min();
            let event = tokio::select! {
                e = stream.next() => e,
                () = self.turn.token.cancelled() => return Ended::Cancelled,
                () = until(due) => {
                    Streaming::catch_up(&mut live.text, &self.turn.core, &self.turn.writer);
                    Streaming::catch_up(&mut live.reasoning, &self.turn.core, &self.turn.writer);
                    continue;
                }
            };
            match event {
                None => return Ended::Done,
                Some(Err(e)) => return Ended::Failed(e),
                Some(Ok(event)) => self.take(event, live, result).await,
            }
            // A stream whose events are all in already (a burst of a thousand tool calls)
            // still lets the other work of this thread run now and then: the calls started so
            // far go on meanwhile, instead of waiting for the whole burst to be taken in.
            tokio::task::coop::consume_budget().await;
        }
    }

    /// Takes in one event of the stream.
    async fn take(&mut self, event: ModelEvent, live: &mut Live, result: &mut StepResult) {
        match event {
            ModelEvent::TextDelta(delta) => {
                stream_text(&mut self.turn, &mut live.text, delta, false);
            }
            ModelEvent::ReasoningDelta(delta) => {
                stream_text(&mut self.turn, &mut live.reasoning, delta, true);
            }
            ModelEvent::ReasoningSignature(signature) => {
                if let Some(streaming) = &live.reasoning {
                    streaming.part.sign(signature);
                }
            }
            ModelEvent::ToolCallStart { id, name } => self.calls.begin(&mut self.turn, id, name),
            ModelEvent::ToolCall {
                id,
                name,
                arguments,
            } => {
                self.calls.call(&mut self.turn, id, name, arguments).await;
            }
            ModelEvent::Usage(u) => result.usage = u,
            ModelEvent::Finish(reason) => result.finish = Some(reason),
        }
    }
}

/// Appends a delta to the streaming text (or reasoning) part, started with the first.
fn stream_text(turn: &mut Turn, slot: &mut Option<Streaming>, delta: String, is_reasoning: bool) {
    if slot.is_none() {
        let part = turn.new_part(Streaming::empty_kind(is_reasoning));
        *slot = Some(Streaming::start(part, &turn.writer));
    }
    if let Some(streaming) = slot {
        streaming.push(delta, &turn.core, &turn.writer);
    }
}

fn aborted() -> AssistantError {
    AssistantError::aborted("The operation was aborted.")
}
