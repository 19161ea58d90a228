//! Turning one model stream into parts, running its tool calls, and retrying failed calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value};
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::{MessageId, now_ms};
use taskforce_agents::model::{ApiError, CreatedTime, RetryPart, ToolMetadata};
use taskforce_agents::model::{
    AssistantError, CacheTokens, Message, ModelRef, Part, PartKind, Session, StartTime,
    StepFinishPart, StepStartPart, Tokens, ToolPart, ToolState, ToolStatePending, ToolStateRunning,
};
use taskforce_agents::permission::{Layers, PermissionError};
use taskforce_agents::provider::{
    FinishReason, ModelEvent, ModelRequest, ProviderError, Usage, cost,
};
use taskforce_agents::tool::{Delegate, Tool, ToolError, ToolOutput};
use tokio_util::sync::CancellationToken;

use super::call::{CallSite, call_tool, delegate};
use super::host::SessionToolHost;
use super::step::to_assistant_error;
use super::streaming::Streaming;
use super::writer::{Held, Item, Writer};
use crate::bus::{Event, SessionStatus};
use crate::core::Core;

/// How often a failed model call is retried when the provider sets no `max_retries`.
const DEFAULT_MAX_RETRIES: u32 = 4;

/// The longest wait between two attempts.
const MAX_RETRY_DELAY: std::time::Duration = std::time::Duration::from_secs(30);

/// How many identical consecutive tool calls count as a doom loop (reference S14).
const DOOM_LOOP_THRESHOLD: usize = 3;

/// The key of a reasoning part's metadata holding its provider signature (as OpenCode stores
/// the AI SDK's provider metadata: `{"anthropic": {"signature": …}}`).
pub(crate) const REASONING_PROVIDER: &str = "anthropic";

/// The metadata value recording a reasoning signature.
fn signed(signature: String) -> Value {
    let mut m = Map::new();
    m.insert("signature".into(), Value::String(signature));
    Value::Object(m)
}

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

/// A part shared between the processor and a running tool's host. Its states are shared too:
/// each is handed to the bus and the store as is, and a change copies the part only while an
/// earlier state is still held somewhere.
#[derive(Clone)]
pub(crate) struct SharedPart(Arc<Mutex<Arc<Part>>>);

impl SharedPart {
    pub fn new(part: Part) -> Self {
        SharedPart(Arc::new(Mutex::new(Arc::new(part))))
    }

    /// The part as it is now.
    pub fn lock(&self) -> Arc<Part> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The part as it ended.
    pub fn into_part(self) -> Arc<Part> {
        match Arc::try_unwrap(self.0) {
            Ok(cell) => cell.into_inner().unwrap_or_else(PoisonError::into_inner),
            Err(shared) => shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    /// What `look` finds in the part as it is now.
    pub fn peek<R>(&self, look: impl FnOnce(&Part) -> R) -> R {
        look(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Changes the part in place when nothing else holds its current state (`change` gets
    /// `Ok`), else replaces it by the copy `change` makes from it (`Err`); returns the new state.
    pub fn change_or_copy(
        &self,
        change: impl FnOnce(Result<&mut Part, &Part>) -> Option<Part>,
    ) -> Arc<Part> {
        let mut part = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(owned) = Arc::get_mut(&mut part) {
            if let Some(next) = change(Ok(owned)) {
                *owned = next;
            }
        } else if let Some(next) = change(Err(&part)) {
            *part = Arc::new(next);
        }
        part.clone()
    }

    /// Changes the part and returns its new state.
    pub fn update(&self, change: impl FnOnce(&mut Part)) -> Arc<Part> {
        let mut part = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        change(Arc::make_mut(&mut part));
        part.clone()
    }
}

/// Turns one model stream into parts and runs its tool calls.
pub(super) struct Processor {
    pub core: Arc<Core>,
    pub writer: Writer,
    pub session: Arc<Session>,
    pub agent: Arc<AgentInfo>,
    pub model: ModelRef,
    pub message_id: MessageId,
    /// The tools the step offers: their places in `core.tools` (no reference counts to touch
    /// per step).
    pub tools: Vec<usize>,
    /// The agent's and the session's rules, merged, over the session's callers' rules: what
    /// the step's calls are asked against.
    pub rules: Layers,
    pub token: CancellationToken,
    /// Every part of the message, in creation order.
    pub parts: Vec<SharedPart>,
    /// The user mentioned an agent: task calls of this step skip their permission ask.
    pub bypass_agent_check: bool,
    /// The task tool is withheld by a guard (subagents off, depth limit): a call anyway runs it,
    /// and it answers with the guard's code instead of "unavailable tool".
    pub task_guarded: bool,
    /// What starts the subagents of the step's calls, made at the first call.
    pub delegate: Option<Arc<dyn Delegate>>,
    /// Written before the step's opening, in its commit (see [`Held`]).
    pub held: Held,
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

type ToolRun = tokio::task::JoinHandle<(String, Result<ToolOutput, ToolError>)>;

impl Processor {
    pub async fn process(
        &mut self,
        model: &dyn taskforce_agents::provider::LanguageModel,
        request: ModelRequest,
        opening: Arc<Message>,
    ) -> StepResult {
        let mut result = StepResult::default();
        // The answer's first state and its step-start part, in one commit.
        let start = self.new_part(StepStartPart::default().into());
        let opened = self
            .writer
            .save_after(
                &mut self.held,
                &[Item::Message(&opening), Item::Part(&start.lock())],
            )
            .await;
        drop(opening);
        if let Err(e) = opened {
            result.error = Some(AssistantError::unknown(e.to_string()));
            return result;
        }
        let mut text: Option<Streaming> = None;
        let mut reasoning: Option<Streaming> = None;
        let mut calls: HashMap<String, SharedPart, foldhash::fast::RandomState> =
            HashMap::default();
        let mut runs: FuturesUnordered<ToolRun> = FuturesUnordered::new();
        let mut aborted_now = false;
        let mut attempt: u32 = 0;
        'attempts: loop {
            // Where this attempt's parts begin (a failed attempt's are removed before a retry).
            let attempt_start = self.parts.len();
            let stream = tokio::select! {
                s = model.stream(&request) => s,
                () = self.token.cancelled() => {
                    aborted_now = true;
                    break 'attempts;
                }
            };
            let mut stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    if self.may_retry(&e, attempt, &runs) {
                        match self.retry(&e, &mut attempt).await {
                            Ok(()) => continue 'attempts,
                            Err(()) => {
                                aborted_now = true;
                                break 'attempts;
                            }
                        }
                    }
                    result.error = Some(to_assistant_error(&e));
                    break 'attempts;
                }
            };
            loop {
                // Text of a stream that pauses is written (and published whole) once it is due,
                // not only at the next delta: what a stalled or killed call said so far is on
                // disk and shown.
                let every = self.core.flush_every;
                let due = [
                    Streaming::due(&text, every),
                    Streaming::due(&reasoning, every),
                ]
                .into_iter()
                .flatten()
                .min();
                let event = tokio::select! {
                    e = stream.next() => e,
                    () = self.token.cancelled() => { aborted_now = true; break 'attempts; }
                    () = until(due) => {
                        Streaming::catch_up(&mut text, &self.core, &self.writer);
                        Streaming::catch_up(&mut reasoning, &self.core, &self.writer);
                        continue;
                    }
                };
                match event {
                    None => break 'attempts,
                    Some(Err(e)) => {
                        // A call cut before any tool ran is retried from the start: what it
                        // streamed is removed (stored and shown once, by the attempt that
                        // succeeds); a retry part says why it was cut.
                        if self.may_retry(&e, attempt, &runs) {
                            reasoning = None;
                            text = None;
                            calls.clear();
                            self.discard_from(attempt_start).await;
                            match self.retry(&e, &mut attempt).await {
                                Ok(()) => continue 'attempts,
                                Err(()) => {
                                    aborted_now = true;
                                    break 'attempts;
                                }
                            }
                        }
                        result.error = Some(to_assistant_error(&e));
                        break 'attempts;
                    }
                    Some(Ok(ModelEvent::TextDelta(delta))) => {
                        self.stream_text(&mut text, delta, false);
                    }
                    Some(Ok(ModelEvent::ReasoningDelta(delta))) => {
                        self.stream_text(&mut reasoning, delta, true);
                    }
                    Some(Ok(ModelEvent::ReasoningSignature(signature))) => {
                        if let Some(streaming) = &reasoning {
                            streaming.part.update(|p| {
                                if let PartKind::Reasoning(r) = &mut p.kind {
                                    r.metadata
                                        .get_or_insert_with(Map::new)
                                        .insert(REASONING_PROVIDER.into(), signed(signature));
                                }
                            });
                        }
                    }
                    Some(Ok(ModelEvent::ToolCallStart { id, name })) => {
                        // Pending lasts until the arguments are in: published, not written.
                        let part = self.new_part(ToolPart::pending(id.clone(), name).into());
                        self.writer.part_live(part.lock());
                        calls.insert(id, part);
                    }
                    Some(Ok(ModelEvent::ToolCall {
                        id,
                        name,
                        arguments,
                    })) => {
                        let part = match calls.get(&id) {
                            Some(p) => p.clone(),
                            None => {
                                let p = self
                                    .new_part(ToolPart::pending(id.clone(), name.clone()).into());
                                calls.insert(id.clone(), p.clone());
                                p
                            }
                        };
                        runs.push(self.start_tool(part, id, name, arguments).await);
                    }
                    Some(Ok(ModelEvent::Usage(u))) => result.usage = u,
                    Some(Ok(ModelEvent::Finish(reason))) => result.finish = Some(reason),
                }
            }
        }
        // Finished text is written with the step's closing commit.
        result.closing.extend(Streaming::end(reasoning));
        result.closing.extend(Streaming::end(text));

        // Wait for the step's tool calls; a cancel reaches them through their child tokens.
        // The call that ends last, once the stream is over, is written with the closing commit
        // (and what it leaves pending with it), ahead of the finished text as it would have been.
        let mut last: Vec<Arc<Part>> = Vec::new();
        while let Some(joined) = runs.next().await {
            let Ok((call_id, outcome)) = joined else {
                continue;
            };
            if let Some(part) = calls.get(&call_id) {
                if matches!(&outcome, Err(e) if matches!(
                    e.cause(),
                    ToolError::Permission(PermissionError::Rejected)
                )) {
                    result.blocked = true;
                }
                if runs.is_empty() && !self.token.is_cancelled() {
                    last.push(self.end_tool(part, outcome));
                } else {
                    self.finish_tool(part, outcome).await;
                }
            }
        }
        if aborted_now || self.token.is_cancelled() {
            result.error = Some(aborted());
        }
        // Nothing stays pending or running.
        for part in calls.values() {
            if !part.peek(|p| p.as_tool().is_some_and(|t| t.state.is_finished())) {
                if last.is_empty() {
                    self.finish_tool(part, Err(ToolError::Aborted)).await;
                } else {
                    last.push(self.end_tool(part, Err(ToolError::Aborted)));
                }
            }
        }
        result.closing.splice(0..0, last);
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
            .core
            .providers
            .model_config(&self.model)
            .and_then(|m| m.cost.as_ref());
        let finish = self.new_part(
            StepFinishPart::new(reason, cost(&result.usage, price), tokens(&result.usage)).into(),
        );
        // Written with the assistant message's final state, in one commit.
        result.closing.push(finish.lock());
        result
    }

    /// The tools the step offers.
    fn offered(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter().filter_map(|&i| self.core.tools.get(i))
    }

    fn new_part(&mut self, kind: PartKind) -> SharedPart {
        let part = SharedPart::new(Part::new(
            self.session.id.clone(),
            self.message_id.clone(),
            kind,
        ));
        self.parts.push(part.clone());
        part
    }

    /// Appends a delta to the streaming text (or reasoning) part, started with the first.
    fn stream_text(&mut self, slot: &mut Option<Streaming>, delta: String, is_reasoning: bool) {
        if slot.is_none() {
            let part = self.new_part(Streaming::empty_kind(is_reasoning));
            *slot = Some(Streaming::start(part, &self.writer));
        }
        if let Some(streaming) = slot {
            streaming.push(delta, &self.core, &self.writer);
        }
    }

    /// Marks a call running and spawns it; unknown tools and bad JSON fail without running.
    async fn start_tool(
        &mut self,
        part: SharedPart,
        id: String,
        name: String,
        arguments: String,
    ) -> ToolRun {
        let parsed: Result<Map<String, Value>, String> = if arguments.trim().is_empty() {
            Ok(Map::new())
        } else {
            match serde_json::from_str::<Value>(&arguments) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(other) => Err(format!("expected a JSON object, got {other}")),
                Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
            }
        };
        let input = parsed.clone().unwrap_or_default();
        let tool = self
            .offered()
            .find(|t| t.id() == name)
            .or_else(|| self.offered().find(|t| t.id() == name.to_lowercase()))
            .cloned()
            .or_else(|| {
                let task = self.task_guarded && name.eq_ignore_ascii_case("task");
                task.then(|| self.core.tools.iter().find(|t| t.id() == "task").cloned())
                    .flatten()
            });
        let doom = self.is_doom_loop(&name, &input);
        let running = part.update(|p| {
            if let PartKind::Tool(t) = &mut p.kind {
                t.tool = tool.as_ref().map_or(name.clone(), |t| t.id().to_string());
                t.state = ToolState::Running(ToolStateRunning::new(input.clone(), now_ms()));
            }
        });
        // Published now; written only if the call lasts (see below), as streaming text is.
        self.writer.part_live(running);

        let host = Arc::new(SessionToolHost::new(
            self.core.clone(),
            self.writer.clone(),
            part.clone(),
            self.rules.clone(),
        ));
        let site = CallSite {
            core: &self.core,
            session: &self.session,
            agent: self.agent.clone(),
            model: self.model.clone(),
            message_id: self.message_id.clone(),
            token: &self.token,
        };
        if self.delegate.is_none() {
            self.delegate = delegate(&self.core, &self.session);
        }
        let ctx = site.context(
            id.clone(),
            host.clone(),
            self.delegate.clone(),
            self.bypass_agent_check,
            None,
        );
        // Named only in the error of a call to a tool the step does not offer.
        let available = match &tool {
            None => self
                .offered()
                .map(|t| t.id())
                .collect::<Vec<_>>()
                .join(", "),
            Some(_) => String::new(),
        };
        let core = self.core.clone();
        let flush_every = self.core.flush_every;
        let agent = self.agent.clone();
        // Boxed, so that ending the call copies no large state machine (see `start_loop`).
        tokio::spawn(Box::pin(async move {
            let outcome = match (tool, parsed) {
                (None, _) => Err(ToolError::Failed(format!(
                    "Model tried to call unavailable tool '{name}'. Available tools: {available}."
                ))),
                (Some(tool), Err(message)) => Err(ToolError::InvalidArguments {
                    tool: tool.id().to_string(),
                    message,
                }),
                (Some(tool), Ok(args)) => {
                    let allowed = if doom {
                        host.ask_doom_loop(&ctx, &agent, tool.id(), &args).await
                    } else {
                        Ok(())
                    };
                    match allowed {
                        Ok(()) => {
                            let call = call_tool(&core, tool.as_ref(), Value::Object(args), &ctx);
                            tokio::pin!(call);
                            tokio::select! {
                                out = &mut call => out,
                                () = tokio::time::sleep(flush_every) => {
                                    // A call that lasts is on disk as running, so a crash
                                    // leaves it visible as interrupted.
                                    core.store.queue_part(&part.lock());
                                    call.await
                                }
                            }
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            (id, outcome)
        }))
    }

    /// Whether a failed call may be tried again: the error is retryable, no tool of this step
    /// has started, and the provider's `max_retries` is not used up.
    fn may_retry(
        &self,
        error: &ProviderError,
        attempt: u32,
        runs: &FuturesUnordered<ToolRun>,
    ) -> bool {
        let max = self
            .core
            .config
            .provider
            .get(&self.model.provider_id)
            .and_then(|p| p.max_retries)
            .unwrap_or(DEFAULT_MAX_RETRIES);
        error.is_retryable() && runs.is_empty() && attempt < max
    }

    /// Removes the parts from `start` on (a failed attempt's): from the store, after any
    /// queued write of them, and from the bus's listeners with `message.part.removed`.
    async fn discard_from(&mut self, start: usize) {
        let parts: Vec<SharedPart> = self.parts.drain(start.min(self.parts.len())..).collect();
        for part in parts {
            let part = part.lock();
            if let Err(error) = self.core.store.remove_part(&part.id).await {
                tracing::warn!(%error, part = %part.id, "a failed attempt's part was not removed");
            }
            self.core.bus.publish(Event::PartRemoved {
                session_id: part.session_id.clone(),
                message_id: part.message_id.clone(),
                part_id: part.id.clone(),
            });
        }
    }

    /// Records a retry part, shows the retry status, and waits the backoff (2 s doubling, at
    /// most 30 s, or what `retry-after` asked for); `Err` when cancelled while waiting.
    async fn retry(&mut self, error: &ProviderError, attempt: &mut u32) -> Result<(), ()> {
        *attempt += 1;
        let delay = match error {
            ProviderError::Http {
                retry_after: Some(after),
                ..
            } => *after,
            _ => self
                .core
                .retry_base
                .saturating_mul(1 << (*attempt - 1).min(16))
                .min(MAX_RETRY_DELAY),
        };
        let mut api = ApiError::new(error.to_string(), true);
        if let ProviderError::Http { status, body, .. } = error {
            api = api.with_status(*status);
            api.response_body = Some(body.clone());
        }
        let retry = self.new_part(
            RetryPart {
                attempt: *attempt,
                error: api,
                time: CreatedTime { created: now_ms() },
            }
            .into(),
        );
        let _ = self.writer.part(&retry.lock()).await;
        let next = now_ms().saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        self.writer.status(
            &self.session,
            SessionStatus::Retry {
                attempt: *attempt,
                message: error.to_string(),
                next,
            },
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {
                self.writer.status(&self.session, SessionStatus::Busy);
                Ok(())
            }
            () = self.token.cancelled() => Err(()),
        }
    }

    /// Whether the last `DOOM_LOOP_THRESHOLD` tool calls of this message are this same call.
    fn is_doom_loop(&self, name: &str, input: &Map<String, Value>) -> bool {
        let mut same = 0;
        for part in self.parts.iter().rev() {
            let part = part.0.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(tool) = part.as_tool() else { continue };
            if matches!(tool.state, ToolState::Pending(_)) {
                continue;
            }
            if tool.tool != name || *tool.state.input() != *input {
                return false;
            }
            same += 1;
            if same == DOOM_LOOP_THRESHOLD {
                return true;
            }
        }
        false
    }

    /// Records a call's result on its part, writes and publishes it.
    async fn finish_tool(&self, part: &SharedPart, outcome: Result<ToolOutput, ToolError>) {
        let done = self.end_tool(part, outcome);
        // A cancelled run's calls end without waiting for the disk (see `Writer::save_behind`).
        if self.token.is_cancelled() {
            self.writer.save_behind(Vec::new(), vec![done]);
        } else {
            let _ = self.writer.part(&done).await;
        }
    }

    /// Records a call's result on its part; returns the ended state (not written yet).
    fn end_tool(&self, part: &SharedPart, outcome: Result<ToolOutput, ToolError>) -> Arc<Part> {
        let now = now_ms();
        // The running state is moved into the ended one when nothing else holds it; otherwise
        // only what the ended state keeps of it is copied.
        part.change_or_copy(|p| match p {
            Ok(owned) => {
                if let PartKind::Tool(tool) = &mut owned.kind {
                    let running = std::mem::replace(
                        &mut tool.state,
                        ToolState::Pending(ToolStatePending::default()),
                    );
                    tool.state = ended_owned(running, outcome, now);
                }
                None
            }
            Err(p) => {
                let PartKind::Tool(tool) = &p.kind else {
                    return None;
                };
                Some(Part {
                    id: p.id.clone(),
                    session_id: p.session_id.clone(),
                    message_id: p.message_id.clone(),
                    kind: PartKind::Tool(ToolPart {
                        call_id: tool.call_id.clone(),
                        tool: tool.tool.clone(),
                        metadata: tool.metadata.clone(),
                        state: ended(&tool.state, outcome, now),
                    }),
                })
            }
        })
    }
}

/// The state a call ends in at `now`, from the state it is in (only read: what the ended state
/// keeps of it is copied, not the published metadata the outcome replaces — a task's is large
/// and all replaced) and its outcome.
fn ended(state: &ToolState, outcome: Result<ToolOutput, ToolError>, now: u64) -> ToolState {
    let own = match &outcome {
        Ok(out) => Some(&out.metadata),
        Err(e) => e.metadata(),
    };
    let kept = match state {
        ToolState::Running(r) => ToolState::Running(ToolStateRunning {
            input: r.input.clone(),
            title: r.title.clone(),
            metadata: r.metadata.as_ref().map(|published| {
                let mut kept: ToolMetadata = published
                    .iter()
                    .map(|(key, value)| {
                        let replaced = own.is_some_and(|own| own.contains_key(key));
                        let value = if replaced { Value::Null } else { value.clone() };
                        (key.clone(), value)
                    })
                    .collect::<Map<String, Value>>()
                    .into();
                if let Some(details) = published.details()
                    && own.is_none_or(|own| own.details().is_none())
                {
                    kept.set_details(details.clone());
                }
                kept
            }),
            time: r.time,
        }),
        other => other.clone(),
    };
    ended_owned(kept, outcome, now)
}

/// What the model reads of a failed call: a coded task failure as `CODE: message`, built in
/// one allocation (a cancelled tree ends 1,110 task calls at once), any other error as it
/// displays.
fn error_text(error: &ToolError) -> String {
    match error {
        ToolError::Task(failure) => failure.error.text(),
        other => other.to_string(),
    }
}

/// [`ended`] for a state the caller owns: its input, title and published metadata are moved.
fn ended_owned(state: ToolState, outcome: Result<ToolOutput, ToolError>, now: u64) -> ToolState {
    let running = match state {
        ToolState::Running(r) => r,
        other => ToolStateRunning {
            input: other.input().clone(),
            title: None,
            metadata: None,
            time: StartTime { start: now },
        },
    };
    end_running(running, outcome, error_text, now)
}

/// How a running call ends at `now`: completed with the output, or failed with `text` of the
/// error; the outcome's own metadata (a task's envelope) is laid over what the tool published
/// while it ran (published keys keep their place, new ones follow, the outcome's values win).
pub(crate) fn end_running(
    running: ToolStateRunning,
    outcome: Result<ToolOutput, ToolError>,
    text: impl FnOnce(&ToolError) -> String,
    now: u64,
) -> ToolState {
    match outcome {
        Ok(out) => {
            let mut completed = running.complete(out.output, out.title, now);
            completed.metadata.extend(out.metadata);
            ToolState::Completed(completed)
        }
        Err(mut error) => {
            let mut failed = running.fail(text(&error), now);
            if let Some(own) = error.take_metadata() {
                failed
                    .metadata
                    .get_or_insert_with(ToolMetadata::new)
                    .extend(own);
            }
            ToolState::Error(failed)
        }
    }
}

fn aborted() -> AssistantError {
    AssistantError::aborted("The operation was aborted.")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use taskforce_agents::id::{MessageId, SessionId};

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn meta(value: Value) -> ToolMetadata {
        map(value).into()
    }

    fn json_of(metadata: &ToolMetadata) -> Value {
        serde_json::to_value(metadata).unwrap()
    }

    #[test]
    fn the_outcome_metadata_is_laid_over_what_the_tool_published() {
        let mut running = ToolStateRunning::new(Map::new(), 1);
        running.metadata = Some(meta(json!({"sessionId": "a", "live": 1, "summary": [1]})));
        let out = ToolOutput {
            title: "t".into(),
            output: "o".into(),
            metadata: meta(json!({"summary": [1, 2], "details": {"x": 1}, "sessionId": "a"})),
        };
        let ToolState::Completed(done) = end_running(running, Ok(out), |_| String::new(), 2) else {
            panic!("not completed");
        };
        assert_eq!(
            done.metadata.keys().collect::<Vec<_>>(),
            ["sessionId", "live", "summary", "details"]
        );
        assert_eq!(
            json_of(&done.metadata),
            json!({"sessionId": "a", "live": 1, "summary": [1, 2], "details": {"x": 1}})
        );
    }

    #[test]
    fn a_call_ends_from_its_running_state_without_changing_it() {
        let mut running = ToolStateRunning::new(map(json!({"p": 1})), 5);
        running.title = Some("working".into());
        running.metadata = Some(meta(json!({"live": true})));
        let state = ToolState::Running(running);
        let out = ToolOutput {
            title: "done".into(),
            output: "ok".into(),
            metadata: meta(json!({"n": 2})),
        };
        let ToolState::Completed(done) = ended(&state, Ok(out), 9) else {
            panic!("not completed");
        };
        assert_eq!(done.input, map(json!({"p": 1})));
        assert_eq!(done.title, "done");
        assert_eq!(done.time.start, 5);
        assert_eq!(done.time.end, 9);
        assert_eq!(json_of(&done.metadata), json!({"live": true, "n": 2}));

        let ToolState::Error(failed) = ended(&state, Err(ToolError::Aborted), 9) else {
            panic!("not an error");
        };
        assert_eq!(failed.metadata, Some(meta(json!({"live": true}))));
        assert_eq!(failed.time.start, 5);
        let pending = ToolState::Pending(Default::default());
        let ToolState::Error(failed) = ended(&pending, Err(ToolError::Aborted), 9) else {
            panic!("not an error");
        };
        assert_eq!(failed.metadata, None);
        assert!(matches!(state, ToolState::Running(_)));
    }

    #[test]
    fn a_typed_envelope_survives_the_copy_path_unless_the_outcome_brings_one() {
        use taskforce_agents::tool::{TaskEnvelope, TaskMode};
        let mut published = meta(json!({"sessionId": "a"}));
        published.set_details(TaskEnvelope::new(TaskMode::Single));
        let mut running = ToolStateRunning::new(Map::new(), 1);
        running.metadata = Some(published);
        let state = ToolState::Running(running);
        let ToolState::Error(kept) = ended(&state, Err(ToolError::Aborted), 2) else {
            panic!("not an error");
        };
        let kept = kept.metadata.unwrap();
        assert_eq!(kept.details().map(|d| d.mode), Some(TaskMode::Single));
        let mut own = meta(json!({}));
        own.set_details(TaskEnvelope::new(TaskMode::Parallel));
        let out = ToolOutput {
            title: "t".into(),
            output: "o".into(),
            metadata: own,
        };
        let ToolState::Completed(done) = ended(&state, Ok(out), 2) else {
            panic!("not completed");
        };
        assert_eq!(
            done.metadata.details().map(|d| d.mode),
            Some(TaskMode::Parallel)
        );
        assert_eq!(done.metadata["sessionId"], "a");
    }

    #[test]
    fn a_call_owned_by_nobody_else_ends_the_same_when_moved() {
        let mut running = ToolStateRunning::new(map(json!({"p": 1})), 5);
        running.title = Some("working".into());
        running.metadata = Some(meta(
            json!({"sessionId": "a", "live": true, "summary": [1]}),
        ));
        let out = || ToolOutput {
            title: "done".into(),
            output: "ok".into(),
            metadata: meta(json!({"summary": [1, 2], "n": 2})),
        };
        let outcomes: [fn() -> Result<ToolOutput, ToolError>; 2] = [
            || Err(ToolError::Aborted),
            || Err(ToolError::Failed("no".into())),
        ];
        let states = [
            ToolState::Running(running),
            ToolState::Pending(Default::default()),
        ];
        for state in &states {
            let by_ref = ended(state, Ok(out()), 9);
            assert_eq!(ended_owned(state.clone(), Ok(out()), 9), by_ref);
            if let (ToolState::Running(_), ToolState::Completed(c)) = (state, &by_ref) {
                assert_eq!(
                    c.metadata.keys().collect::<Vec<_>>(),
                    ["sessionId", "live", "summary", "n"]
                );
            }
            for outcome in outcomes {
                assert_eq!(
                    ended_owned(state.clone(), outcome(), 9),
                    ended(state, outcome(), 9)
                );
            }
        }
        let shared = SharedPart::new(Part::new(
            SessionId::new(),
            MessageId::new(),
            PartKind::Tool(ToolPart::pending(String::from("c1"), String::from("read"))),
        ));
        let held = shared.lock();
        // Held elsewhere: copied, the held state is left as it was.
        let copied = shared.change_or_copy(|p| match p {
            Ok(_) => panic!("the state is shared"),
            Err(p) => Some(p.clone()),
        });
        assert!(!Arc::ptr_eq(&copied, &held));
        drop((held, copied));
        // Held by nobody else: changed in place.
        let before = Arc::as_ptr(&shared.lock());
        let changed = shared.change_or_copy(|p| match p {
            Ok(_) => None,
            Err(_) => panic!("nobody else holds it"),
        });
        assert_eq!(Arc::as_ptr(&changed), before);
    }
}
