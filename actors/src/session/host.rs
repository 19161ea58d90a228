//! The services a session gives its running tools: permission asks, live metadata, todos.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, PartKind, Todo, ToolMetadata, ToolState};
use taskforce_agents::permission::{AskDecision, Layers, PermissionAsk, PermissionError};
use taskforce_agents::question::{QuestionAnswer, QuestionError, QuestionInfo};
use taskforce_agents::tool::{ToolContext, ToolError, ToolHost};

use super::part::SharedPart;
use super::writer::Writer;
use crate::bus::Event;
use crate::core::Core;
use crate::permission::{AskOrigin, ToolRef};

/// How far up a parent chain an ask's origin is followed (only a corrupt cycle gets near it).
const MAX_ORIGIN_DEPTH: usize = 256;

/// The host of one tool call: it knows the call's part and the session's rules in layers.
pub(crate) struct SessionToolHost {
    core: Arc<Core>,
    writer: Writer,
    part: SharedPart,
    ruleset: Layers,
    /// A running state of the call has been queued for the store.
    stored: AtomicBool,
}

impl SessionToolHost {
    pub fn new(core: Arc<Core>, writer: Writer, part: SharedPart, ruleset: Layers) -> Self {
        SessionToolHost {
            core,
            writer,
            part,
            ruleset,
            stored: AtomicBool::new(false),
        }
    }

    /// Queues the call's running state for the store, unless one was queued already (for a
    /// call that lasts: on disk as running once, not again at every change).
    pub fn store_running_once(&self) {
        if !self.stored.load(Ordering::Relaxed) {
            self.store_now();
        }
    }

    /// Queues the call's running state as it is now for the store, in order with the
    /// session's saves; not published: its states went out live.
    fn store_now(&self) {
        self.stored.store(true, Ordering::Relaxed);
        self.writer.queue_part(self.part.lock());
    }

    /// Asks `doom_loop` for a call repeated too often, against the agent's own rules (not the
    /// session's) under the session's callers' rules.
    pub async fn ask_doom_loop(
        &self,
        ctx: &ToolContext,
        agent: &AgentInfo,
        tool: &str,
        input: &Map<String, Value>,
    ) -> Result<(), ToolError> {
        let ask = PermissionAsk {
            permission: "doom_loop".into(),
            patterns: vec![tool.to_string()],
            always: vec![tool.to_string()],
            force_ask: false,
            metadata: json!({"tool": tool, "input": input})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        self.core
            .broker
            .ask_from(
                self.origin(ctx),
                Some(tool_ref(ctx)),
                ask,
                &Layers::new(agent.permission.clone(), self.ruleset.callers().to_vec()),
                || self.waiting(ctx),
            )
            .await
            .map_err(ToolError::from)
    }

    /// Where an ask of `ctx` comes from, answered once the call's step is on disk and
    /// published, so that the ask names a call a client can find (a call that only reads may
    /// start before; see `dispatch`); awaited only when a person is asked. A failed commit is
    /// not this ask's to report: the run's end reports it.
    async fn origin(&self, ctx: &ToolContext) -> AskOrigin {
        let _ = self.writer.settle().await;
        origin(&self.core, ctx).await
    }

    /// Made just before an ask of the call goes out to a person: the call's running part is
    /// queued for the store first (a call is otherwise stored only once it has run for a
    /// while), so that a client reading the session after the ask finds the call it names
    /// (OpenCode shows the ask's command from that call); then [`waiting`].
    fn waiting(&self, ctx: &ToolContext) -> Option<Box<dyn Send>> {
        self.stored.store(true, Ordering::Relaxed);
        self.core.store.queue_part(self.part.lock());
        waiting(&self.core, ctx)
    }
}

/// Where an ask of `ctx` comes from (see [`ask_origin`]).
async fn origin(core: &Core, ctx: &ToolContext) -> AskOrigin {
    ask_origin(core, &ctx.session_id, &ctx.agent.name).await
}

/// Where an ask by `agent` in `session` comes from: the root of the session's tree and the
/// agents from the root's down to `agent`. Ancestors are read from the store (asks are rare);
/// an ancestor's agent is that of its last user message, the one now running. A session that
/// cannot be read ends the walk (logged) and counts as the root.
pub(crate) async fn ask_origin(core: &Core, session: &SessionId, agent: &str) -> AskOrigin {
    let mut path = vec![agent.to_string()];
    let mut root = session.clone();
    for _ in 0..MAX_ORIGIN_DEPTH {
        let parent = match core.store.session(&root).await {
            Ok(session) => session.and_then(|s| s.parent_id),
            Err(error) => {
                tracing::warn!(%error, session = %root, "cannot follow an ask to its root");
                None
            }
        };
        let Some(parent) = parent else { break };
        path.push(running_agent(core, &parent).await);
        root = parent;
    }
    path.reverse();
    AskOrigin {
        session_id: session.clone(),
        root_session_id: root,
        path,
    }
}

/// The agent of a session's last user message (`unknown` when it cannot be read).
async fn running_agent(core: &Core, session: &SessionId) -> String {
    let messages = match core.store.messages(session).await {
        Ok(messages) => messages,
        Err(error) => {
            tracing::warn!(%error, %session, "cannot read the agent of an ask's ancestor");
            Vec::new()
        }
    };
    messages
        .iter()
        .rev()
        .find_map(|m| match &*m.info {
            Message::User(u) => Some(u.agent.clone()),
            Message::Assistant(_) => None,
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Held while `ctx`'s session waits for a person's reply: its idle clock (and its callers')
/// stands still meanwhile, as waiting for a person is not idling (the hard cap still runs).
fn waiting(core: &Core, ctx: &ToolContext) -> Option<Box<dyn Send>> {
    core.children()?.hold_clock(&ctx.session_id)
}

fn tool_ref(ctx: &ToolContext) -> ToolRef {
    ToolRef {
        message_id: ctx.message_id.clone(),
        call_id: ctx.call_id.clone(),
    }
}

#[async_trait]
impl ToolHost for SessionToolHost {
    async fn ask(&self, ctx: &ToolContext, ask: PermissionAsk) -> Result<(), PermissionError> {
        let asked = self.core.broker.ask_from(
            self.origin(ctx),
            Some(tool_ref(ctx)),
            ask,
            &self.ruleset,
            || self.waiting(ctx),
        );
        tokio::select! {
            r = asked => r,
            () = ctx.abort.cancelled() => Err(PermissionError::Rejected),
        }
    }

    fn check(&self, _ctx: &ToolContext, ask: &PermissionAsk) -> AskDecision {
        self.core.broker.check(ask, &self.ruleset)
    }

    fn set_metadata(&self, _: &ToolContext, title: Option<String>, metadata: ToolMetadata) {
        let part = self.part.update(|p| {
            if let PartKind::Tool(t) = &mut p.kind
                && let ToolState::Running(r) = &mut t.state
            {
                if title.is_some() {
                    r.title = title;
                }
                r.metadata
                    .get_or_insert_with(ToolMetadata::new)
                    .extend(metadata);
            }
        });
        self.writer.part_live(part);
    }

    fn store_running(&self, _: &ToolContext) {
        self.store_now();
    }

    async fn question(
        &self,
        ctx: &ToolContext,
        questions: Vec<QuestionInfo>,
    ) -> Result<Vec<QuestionAnswer>, QuestionError> {
        let origin = self.origin(ctx).await;
        // Waiting for a person is not idling.
        let _waiting = waiting(&self.core, ctx);
        self.core
            .questions
            .ask(origin, Some(tool_ref(ctx)), questions)
            .await
    }

    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, ToolError> {
        self.core
            .store
            .todos(session)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))
    }

    async fn set_todos(&self, session: &SessionId, todos: Vec<Todo>) -> Result<(), ToolError> {
        self.core
            .store
            .put_todos(session, &todos)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        self.writer.publish_event(Event::TodoUpdated {
            session_id: session.clone(),
            todos,
        });
        Ok(())
    }
}
