//! The task tool's delegate: runs a subagent in a child session and reports on it live.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use async_trait::async_trait;
use futures::StreamExt;
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use taskforce_agents::id::{MessageId, PartId, SessionId, now_ms};
use taskforce_agents::model::{Message, Part, PartKind, Session, ToolState};
use taskforce_agents::permission::{Action, Rule};
use taskforce_agents::tool::background::ChildReport;
use taskforce_agents::tool::{
    Delegate, DisplayItem, SubagentOutcome, SubagentRequest, SubagentStatus, TaskError, TaskUsage,
    ToolContext, ToolError,
};

use super::timeout::{Activity, ActivityFilter, RunLimits};
use super::{Activate, CancelTree, Live, Supervisor, limits, session_depth, task_guard, timeout};
use crate::RuntimeError;
use crate::bus::{BusItem, Envelope, Event, Filter};
use crate::core::Core;
use crate::session::{History, PartInput, PromptInput, Seed, Subtask};
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
    pub(super) parent: Session,
}

impl SupervisorDelegate {
    pub(crate) fn new(core: Arc<Core>, supervisor: Addr<Supervisor>, parent: Session) -> Self {
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
    /// switched off.
    pub(super) fn child_input(&self, request: &SubagentRequest, nests: bool) -> PromptInput {
        let tools: IndexMap<String, bool> = self
            .denied_tools(nests)
            .into_iter()
            .map(|t| (t, false))
            .collect();
        PromptInput {
            parts: vec![PartInput::text(request.prompt.clone())],
            agent: Some(request.agent.clone()),
            model: Some(request.model.clone()),
            tools: Some(tools),
            ..Default::default()
        }
    }

    /// The existing child to continue, or a new child of `parent`.
    pub(super) async fn child_session(
        &self,
        parent: &Session,
        request: &SubagentRequest,
        nests: bool,
    ) -> Result<(Session, bool), ToolError> {
        let store = &self.core.store;
        if let Some(raw) = &request.session_id
            && let Ok(id) = SessionId::parse(raw)
            && let Some(existing) = store.session(&id).await.map_err(failed)?
        {
            if existing.id == parent.id {
                return Err(ToolError::Failed(format!(
                    "session_id {raw} is the calling session itself; omit session_id to start a new task"
                )));
            }
            if self.root_of(&existing).await? != self.root_of(parent).await? {
                return Err(ToolError::Failed(format!(
                    "session_id {raw} belongs to another session tree; omit session_id to start a new task"
                )));
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
        let child = Session::child_of(parent, title, now_ms()).with_permission(rules);
        Ok((child, true))
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
        let parent = &self.parent;
        // The child sits one below its parent; it keeps the task tool while that is above the
        // limit (its own guard hides the tool once it is at the limit).
        let child_depth = session_depth(&self.core, parent).await + 1;
        let nests =
            self.core.config.subagent.enabled && child_depth < self.core.config.subagent.max_depth;
        let (child, new) = self.child_session(parent, &request, nests).await?;
        // Wait for a running slot (and count a new child in its tree) before anything starts.
        let root = self.root_of(parent).await?;
        let admission = limits::admit(&self.core, ctx, &parent.id, &root, new).await?;
        let _slot = admission.slot;
        if let Some(reservation) = admission.reservation {
            reservation.keep();
        }
        self.core.bus.register_parent(&child.id, &parent.id);
        let model_json = serde_json::to_value(&request.model).unwrap_or(Value::Null);
        ctx.metadata(
            Some(request.description.clone()),
            meta(&[
                ("sessionId", json!(child.id)),
                ("model", model_json.clone()),
            ]),
        );

        // Follow the child's tool parts and mirror them on the parent's running part; its
        // activity resets the idle clock.
        let run_limits = RunLimits::new(&self.core.config.subagent, request.timeout);
        let activity = Arc::new(Activity::new());
        let clock_start = tokio::time::Instant::now();
        let seen = activity.clone();
        let mut events = self.core.bus.subscribe(Filter::Session(child.id.clone()));
        let follower_ctx = ctx.clone();
        let child_id = child.id.clone();
        let mut follower = tokio::spawn(async move {
            let mut summary: BTreeMap<PartId, SummaryEntry> = BTreeMap::new();
            // The child's messages and parts as published (the events are shared, not copied),
            // so that its result needs no read of the store.
            let mut seen_messages: BTreeMap<MessageId, Arc<Envelope>> = BTreeMap::new();
            let mut seen_parts: BTreeMap<PartId, Arc<Envelope>> = BTreeMap::new();
            let mut complete = true;
            let mut filter = ActivityFilter::default();
            while let Some(item) = events.next().await {
                let envelope = match item {
                    BusItem::Event(envelope) => envelope,
                    BusItem::Lagged(_) => {
                        complete = false;
                        seen.touch();
                        continue;
                    }
                };
                if filter.is_activity(&envelope.event) {
                    seen.touch();
                }
                match &envelope.event {
                    // The loop goes idle after its last part: the summary is whole.
                    Event::SessionIdle { session_id } if *session_id == child_id => {
                        return (summary, complete, seen_messages, seen_parts);
                    }
                    Event::MessageUpdated { info } => {
                        seen_messages.insert(info.id().clone(), envelope.clone());
                    }
                    Event::MessageRemoved { message_id, .. } => {
                        seen_messages.remove(message_id);
                    }
                    // Streaming deltas are interim: the part's final state follows without one.
                    Event::PartUpdated { delta: Some(_), .. } => {}
                    Event::PartUpdated { part, .. } => {
                        seen_parts.insert(part.id.clone(), envelope.clone());
                        let PartKind::Tool(tool) = &part.kind else {
                            continue;
                        };
                        let entry = SummaryEntry::of(&tool.tool, &tool.state);
                        // The parent's part changes only when a child's call changes status or
                        // title, not on every live update of its metadata; and no longer once
                        // the parent's call is aborted (its final state carries the summary).
                        if summary.get(&part.id) == Some(&entry) {
                            continue;
                        }
                        summary.insert(part.id.clone(), entry);
                        if !follower_ctx.abort.is_cancelled() {
                            follower_ctx.metadata(None, meta(&[("summary", render(&summary))]));
                        }
                    }
                    _ => {}
                }
            }
            (summary, false, seen_messages, seen_parts)
        });

        let input = self.child_input(&request, nests);
        let started = now_ms();
        let run = self.run_child(&child, new, &parent.id, input);
        tokio::pin!(run);
        let mut timed_out = None;
        let result = tokio::select! {
            r = &mut run => r,
            expired = timeout::expiry(run_limits, clock_start, &activity) => {
                timed_out = Some(expired);
                self.supervisor.do_send(CancelTree { id: child.id.clone() });
                tokio::time::timeout(CANCEL_GRACE, &mut run)
                    .await
                    .unwrap_or(Err(ToolError::Aborted))
            }
            () = ctx.abort.cancelled() => {
                self.supervisor.do_send(CancelTree { id: child.id.clone() });
                // Let the child record how it ended, but never wait long for it.
                tokio::time::timeout(CANCEL_GRACE, &mut run)
                    .await
                    .unwrap_or(Err(ToolError::Aborted))
            }
        };
        let (message, status) = match result {
            Ok(message) => {
                let status = match &message.info {
                    Message::Assistant(a) => match &a.error {
                        None => SubagentStatus::Completed,
                        Some(e) if e.name() == ABORTED => SubagentStatus::Cancelled,
                        Some(e) => SubagentStatus::Failed(format!(
                            "subagent session {} failed: {}",
                            child.id,
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
        let followed = tokio::time::timeout(Duration::from_secs(1), &mut follower).await;
        follower.abort();
        // What the child wrote during this run (usage, display items, a fallback summary): as
        // followed live when the follower saw every event (borrowed, not copied), else as
        // stored.
        let stored: Vec<MessageWithParts>;
        let answers: Vec<Answer<'_>> = match &followed {
            Ok(Ok((_, true, messages, parts))) => followed_answers(messages, parts, started),
            _ => {
                stored = self.child_history(&child.id).await;
                stored
                    .iter()
                    .filter(
                        |m| matches!(&m.info, Message::Assistant(a) if a.time.created >= started),
                    )
                    .map(|m| Answer {
                        info: &m.info,
                        parts: m.parts.iter().map(|p| &**p).collect(),
                    })
                    .collect()
            }
        };
        let summary = match &followed {
            Ok(Ok((summary, true, _, _))) => match render(summary) {
                Value::Array(entries) => entries,
                _ => Vec::new(),
            },
            // The follower missed events (or never saw the end): read what the child stored.
            _ => child_summary(&answers),
        };
        let text = message
            .as_ref()
            .and_then(|m| last_text(m.parts.iter().map(|p| &**p)))
            .or_else(|| {
                answers
                    .iter()
                    .rev()
                    .find_map(|a| last_text(a.parts.iter().copied()))
            })
            .unwrap_or_default();
        Ok(SubagentOutcome {
            session_id: child.id.clone(),
            text,
            model: request.model,
            summary,
            status,
            usage: usage_of_infos(answers.iter().map(|a| a.info)),
            display_items: display_items(&answers),
        })
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

/// The text of the last text part among `parts`.
fn last_text<'a>(parts: impl DoubleEndedIterator<Item = &'a Part>) -> Option<String> {
    parts
        .rev()
        .find_map(|p| p.as_text().map(|t| t.text.clone()))
}

/// One answer of the child during a run, borrowed from where it was read.
struct Answer<'a> {
    info: &'a Message,
    parts: Vec<&'a Part>,
}

/// The child's answers created since `started`, from the last published state of its messages
/// and parts: messages by creation time, parts by id (as the store returns them).
fn followed_answers<'a>(
    messages: &'a BTreeMap<MessageId, Arc<Envelope>>,
    parts: &'a BTreeMap<PartId, Arc<Envelope>>,
    started: u64,
) -> Vec<Answer<'a>> {
    let mut answers: Vec<Answer<'a>> = messages
        .values()
        .filter_map(|e| match &e.event {
            Event::MessageUpdated { info }
                if matches!(info, Message::Assistant(a) if a.time.created >= started) =>
            {
                Some(Answer {
                    info,
                    parts: Vec::new(),
                })
            }
            _ => None,
        })
        .collect();
    answers.sort_by_key(|a| a.info.created());
    for e in parts.values() {
        if let Event::PartUpdated { part, .. } = &e.event
            && let Some(answer) = answers.iter_mut().find(|a| a.info.id() == &part.message_id)
        {
            answer.parts.push(part);
        }
    }
    answers
}

/// What the parent's part shows of one child tool call: the tool, its status and title.
#[derive(Debug, PartialEq)]
struct SummaryEntry {
    tool: String,
    status: &'static str,
    title: Option<String>,
}

impl SummaryEntry {
    fn of(tool: &str, state: &ToolState) -> Self {
        let title = match state {
            ToolState::Running(r) => r.title.clone(),
            ToolState::Completed(c) => Some(c.title.clone()),
            _ => None,
        };
        SummaryEntry {
            tool: tool.to_string(),
            status: state.status(),
            title,
        }
    }
}

/// The summary metadata: `[{id, tool, state: {status, title?}}]` in part order.
fn render(summary: &BTreeMap<PartId, SummaryEntry>) -> Value {
    Value::Array(
        summary
            .iter()
            .map(|(id, e)| summary_entry(id, &e.tool, e.status, e.title.as_deref()))
            .collect(),
    )
}

impl SupervisorDelegate {
    /// The child's messages: from its actor's memory when it has them (no wait for the disk),
    /// else from the store.
    async fn child_history(&self, child: &SessionId) -> Vec<MessageWithParts> {
        if let Ok(Some(addr)) = self.supervisor.send(Live { id: child.clone() }).await
            && let Ok(Some(history)) = addr.send(History).await
        {
            return history;
        }
        match self.core.store.messages(child).await {
            Ok(history) => history,
            Err(e) => {
                tracing::warn!(session = %child, "reading the child's messages failed: {e}");
                Vec::new()
            }
        }
    }

    /// Sends the task to the child's actor and waits for its final message.
    async fn run_child(
        &self,
        session: &Session,
        new: bool,
        parent: &SessionId,
        input: PromptInput,
    ) -> Result<MessageWithParts, ToolError> {
        let child = &session.id;
        let addr = self
            .supervisor
            .send(Activate {
                id: child.clone(),
                parent: Some(parent.clone()),
                seed: Some(Seed {
                    session: session.clone(),
                    empty: new,
                    unsaved: new,
                }),
            })
            .await
            .map_err(|_| ToolError::Failed("the runtime has stopped".into()))?;
        let reply = addr
            .send(Subtask { input })
            .await
            .map_err(|_| {
                ToolError::Failed(format!("subagent session {child} stopped unexpectedly"))
            })?
            .map_err(failed)?;
        match reply.await {
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
}

/// `{id, tool, state: {status, title?}}` for one child tool part.
fn summary_entry(id: &PartId, tool: &str, status: &str, title: Option<&str>) -> Value {
    let mut s = Map::new();
    s.insert("status".into(), json!(status));
    if let Some(t) = title {
        s.insert("title".into(), json!(t));
    }
    json!({"id": id, "tool": tool, "state": s})
}

/// The summary of the child's tool parts in `answers`.
fn child_summary(answers: &[Answer<'_>]) -> Vec<Value> {
    answers
        .iter()
        .flat_map(|m| m.parts.iter().copied())
        .filter_map(|p| {
            let t = p.as_tool()?;
            let entry = SummaryEntry::of(&t.tool, &t.state);
            Some(summary_entry(
                &p.id,
                &t.tool,
                entry.status,
                entry.title.as_deref(),
            ))
        })
        .collect()
}

/// The child's own tokens and cost summed over `answers`; turns = how many there are.
pub(super) fn usage_of(answers: &[&MessageWithParts]) -> TaskUsage {
    usage_of_infos(answers.iter().map(|m| &m.info))
}

/// The tokens and cost summed over assistant messages; turns = how many there are.
fn usage_of_infos<'a>(infos: impl Iterator<Item = &'a Message>) -> TaskUsage {
    let mut usage = TaskUsage::default();
    for info in infos {
        if let Message::Assistant(a) = info {
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
fn display_items(answers: &[Answer<'_>]) -> Vec<DisplayItem> {
    answers
        .iter()
        .flat_map(|m| m.parts.iter().copied())
        .filter_map(|p| match &p.kind {
            PartKind::Text(t) if !t.text.is_empty() => Some(DisplayItem::Text {
                text: t.text.clone(),
            }),
            PartKind::Tool(t) => Some(DisplayItem::ToolCall {
                name: t.tool.clone(),
                args: Value::Object(t.state.input().clone()),
            }),
            _ => None,
        })
        .collect()
}

fn meta(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}
