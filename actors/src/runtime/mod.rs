//! The public handle of a running taskforce: sessions, prompts, cancels, queries, events.

mod cluster;
mod command;
mod generate;
mod manage;
mod options;
mod questions;
mod start;
mod stop;
mod tools;
mod tree;
mod undo;
mod work;

pub use generate::GeneratedAgentFile;
pub use manage::SessionPatch;
pub use options::RuntimeOptions;
pub use tools::ToolListItem;
pub use tree::SessionTree;
pub use work::{PendingWork, WorkWatch};

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::Addr;
use taskforce_agents::agent::Registry;
use taskforce_agents::command::Commands;
use taskforce_agents::config::Config;
use taskforce_agents::id::{PermissionId, SessionId};
use taskforce_agents::model::Session;
use taskforce_agents::provider::Providers;

pub use crate::owner::LockError;

use crate::RuntimeError;
use crate::bus::{Event, Filter, SessionStatus, Subscription};
use crate::cluster::{AskOutcome, AskRequest, Cluster};
use crate::core::Core;
use crate::hooks::Hooks;
use crate::mcp::{Mcp, StopOnDrop};
use crate::permission::{PermissionReply, PermissionRequest};
use crate::session::{Exclusive, Job, Prompt, PromptInput, Seed, Writer};
use crate::store::{MessageWithParts, SessionFilter};
use crate::subagent::Subagents;
use crate::supervisor::{
    Activate, ArbiterCores, CancelTree, Forget, Live, LiveCount, Placement, Supervisor,
};

/// A running taskforce. Cheap to clone; usable from any tokio runtime once started.
#[derive(Clone)]
pub struct Runtime {
    core: Arc<Core>,
    supervisor: Addr<Supervisor>,
    subagents: Arc<Subagents>,
    writer: Writer,
    /// The sessions it repaired when it started (left mid-run by runtimes that died).
    repaired: Arc<[SessionId]>,
    /// Stops the MCP servers when the last handle goes away without a stop.
    _mcp: Arc<StopOnDrop>,
    /// The cluster this runtime is a node of, when it joined one.
    cluster: Option<Arc<Cluster>>,
}

impl Runtime {
    /// The cluster this runtime is a node of, when it joined one (see
    /// [`RuntimeOptions::cluster`]).
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Prompts a session and waits for its final assistant message.
    pub async fn prompt(
        &self,
        session: &SessionId,
        input: PromptInput,
    ) -> Result<MessageWithParts, RuntimeError> {
        self.prompt_queued(session, input).await?.await
    }

    /// Queues a prompt and, once the session has it, returns the future of its final answer
    /// (for callers that must know the prompt is in before they act, e.g. cancel).
    pub async fn prompt_queued(
        &self,
        session: &SessionId,
        input: PromptInput,
    ) -> Result<
        impl std::future::Future<Output = Result<MessageWithParts, RuntimeError>> + Send + 'static,
        RuntimeError,
    > {
        let reply = self.send_prompt(session, input).await?;
        let id = session.to_string();
        Ok(async move { reply.await.map_err(|_| RuntimeError::Crashed(id))? })
    }

    /// Prompts a session and returns once the prompt is queued.
    pub async fn prompt_async(
        &self,
        session: &SessionId,
        input: PromptInput,
    ) -> Result<(), RuntimeError> {
        self.send_prompt(session, input).await.map(|_| ())
    }

    async fn send_prompt(
        &self,
        session: &SessionId,
        input: PromptInput,
    ) -> Result<crate::session::Reply, RuntimeError> {
        if self.core.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(RuntimeError::Stopped);
        }
        if let Some(agent) = &input.agent {
            self.core.registry.require(agent)?;
        }
        // An unknown model is the caller's mistake, reported now rather than by the loop.
        if let Some(model) = &input.model {
            self.core.providers.model(model)?;
        }
        if input.no_reply {
            return self
                .send_to_actor(session, || Exclusive(Job::Message(input.clone())))
                .await;
        }
        self.send_to_actor(session, || Prompt {
            input: input.clone(),
        })
        .await
    }

    /// Delivers `make()` to the session's actor, starting it from the store when needed.
    async fn send_to_actor<M, R>(
        &self,
        session: &SessionId,
        make: impl Fn() -> M,
    ) -> Result<R, RuntimeError>
    where
        M: actix::Message<Result = Result<R, RuntimeError>> + Send + 'static,
        R: Send + 'static,
        crate::session::SessionActor: actix::Handler<M>,
    {
        // A live actor knows its session; otherwise it is read (and must exist) first.
        let mut seed = None;
        for _ in 0..2 {
            let live = self
                .supervisor
                .send(Live {
                    id: session.clone(),
                })
                .await
                .map_err(|_| RuntimeError::Stopped)?;
            let addr = match live {
                Some(addr) => addr,
                None => {
                    if seed.is_none() {
                        seed = Some(Seed {
                            session: self.session(session).await?,
                            empty: false,
                            unsaved: false,
                        });
                    }
                    self.activate(session, seed.clone()).await?
                }
            };
            // An actor that stopped between activation and delivery is started again once.
            if let Ok(reply) = addr.send(make()).await {
                return reply;
            }
        }
        Err(RuntimeError::Crashed(session.to_string()))
    }

    async fn activate(
        &self,
        session: &SessionId,
        seed: Option<Seed>,
    ) -> Result<actix::Addr<crate::session::SessionActor>, RuntimeError> {
        self.supervisor
            .send(Activate {
                id: session.clone(),
                parent: None,
                seed,
                near: None,
            })
            .await
            .map_err(|_| RuntimeError::Stopped)
    }

    /// The sessions this runtime repaired when it started: runs that runtimes which died left
    /// half-way, whose unfinished answers and tool calls it ended as interrupted (see
    /// [`crate::session::STOPPED`]).
    pub fn repaired_at_start(&self) -> &[SessionId] {
        &self.repaired
    }

    /// Cancels a session's loop and every descendant's; idle sessions just report idle.
    pub async fn cancel(&self, session: &SessionId) -> Result<(), RuntimeError> {
        // Told first: the store is read only when no session of the tree was live (to name a
        // missing session, or to announce an idle one), not on the way to a running tree.
        let told = self
            .supervisor
            .send(CancelTree {
                id: session.clone(),
            })
            .await
            .map_err(|_| RuntimeError::Stopped)?;
        match &self.cluster {
            // It may run on another node (this one may run only some of its descendants):
            // every node cancels what of its tree it runs. Only a store the nodes share can
            // tell that no node knows it.
            Some(cluster) => {
                if told == 0 && self.core.store.is_shared() {
                    self.session(session).await?;
                }
                cluster.cancel_everywhere(session).await;
            }
            None if told == 0 => {
                let info = self.session(session).await?;
                self.writer.status(&info, SessionStatus::Idle);
            }
            None => {}
        }
        Ok(())
    }

    /// One session.
    pub async fn session(&self, id: &SessionId) -> Result<Session, RuntimeError> {
        self.core
            .store
            .session(id)
            .await?
            .ok_or_else(|| RuntimeError::SessionNotFound(id.to_string()))
    }

    /// The id of the project this runtime works on (its root folder's path), as sessions
    /// record it.
    pub fn project_id(&self) -> &str {
        &self.core.project_id
    }

    /// Sessions matching `filter`, most recently updated first.
    pub async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, RuntimeError> {
        Ok(self.core.store.sessions(filter).await?)
    }

    /// The direct children of a session.
    pub async fn children(&self, id: &SessionId) -> Result<Vec<Session>, RuntimeError> {
        self.session(id).await?;
        Ok(self.core.store.children(id).await?)
    }

    /// Every message of a session with its parts, oldest first.
    pub async fn messages(&self, id: &SessionId) -> Result<Vec<MessageWithParts>, RuntimeError> {
        self.session(id).await?;
        Ok(self.core.store.messages(id).await?)
    }

    /// The session's whole subtree with statuses and usage.
    pub async fn tree(&self, id: &SessionId) -> Result<SessionTree, RuntimeError> {
        let root = self.session(id).await?;
        tree::build(&self.core, root).await
    }

    /// Deletes a session and its subtree (cancelling whatever runs there first).
    pub async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, RuntimeError> {
        self.cancel(id).await?;
        let deleted = self.core.store.delete_session(id).await?;
        let ids: Vec<SessionId> = deleted.iter().map(|s| s.id.clone()).collect();
        self.subagents.forget_trees(&ids);
        let _ = self.supervisor.send(Forget { ids }).await;
        for info in &deleted {
            self.core.bus.publish(Event::SessionDeleted {
                info: Arc::new(info.clone()),
            });
        }
        Ok(deleted)
    }

    /// The status of every session that is not idle.
    pub fn statuses(&self) -> BTreeMap<SessionId, SessionStatus> {
        self.core
            .statuses
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect()
    }

    /// How many session actors are in memory (idle ones stop after `idle_stop`).
    pub async fn live_sessions(&self) -> Result<usize, RuntimeError> {
        self.supervisor
            .send(LiveCount)
            .await
            .map_err(|_| RuntimeError::Stopped)
    }

    /// Which of the runtime's arbiter threads a live session's actor runs on (`None` when it
    /// is not in memory). A root's children are spread over the arbiters; their descendants
    /// run on their top-level ancestor's.
    pub async fn arbiter_of(&self, id: &SessionId) -> Result<Option<usize>, RuntimeError> {
        self.supervisor
            .send(Placement { id: id.clone() })
            .await
            .map_err(|_| RuntimeError::Stopped)
    }

    /// The cores each of the runtime's arbiter threads may run on, in arbiter order: one
    /// each when they are pinned (see [`RuntimeOptions::pin_arbiters`]).
    pub async fn arbiter_cores(&self) -> Result<Vec<Vec<usize>>, RuntimeError> {
        self.supervisor
            .send(ArbiterCores)
            .await
            .map_err(|_| RuntimeError::Stopped)
    }

    /// Registers hooks; they run after those registered before.
    pub fn add_hooks(&self, hooks: Arc<dyn Hooks>) {
        self.core
            .hooks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(hooks);
    }

    /// Subscribes to events passing `filter`.
    pub fn subscribe(&self, filter: Filter) -> Subscription {
        self.core.bus.subscribe(filter)
    }

    /// The number of the newest event published so far (every event has a greater or equal
    /// number than those published before it).
    pub fn last_event_seq(&self) -> u64 {
        self.core.bus.last_seq()
    }

    /// Publishes `event` on the runtime's bus, as if the runtime had (embedders announcing
    /// changes they made, load generators).
    pub fn publish(&self, event: Event) {
        self.core.bus.publish(event);
    }

    /// Answers a pending permission ask; false when none is pending under that id. An "always"
    /// reply returns once its approvals are stored for the project.
    pub async fn reply_permission(
        &self,
        id: &PermissionId,
        reply: PermissionReply,
        message: Option<String>,
    ) -> bool {
        if self.core.broker.reply(id, reply, message.clone()).await {
            return true;
        }
        let reply = AskRequest::Permission {
            id: id.clone(),
            reply,
            message,
        };
        self.forward(&reply).await == AskOutcome::Done
    }

    /// Every pending permission ask, oldest first: in a cluster, those every live node holds.
    pub async fn pending_permissions(&self) -> Vec<PermissionRequest> {
        let mut asks = self.core.broker.list();
        if let Some(cluster) = &self.cluster {
            let elsewhere = cluster.asks_elsewhere().await;
            asks.extend(elsewhere.permissions.into_iter().map(|(_, ask)| ask));
            asks.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        }
        asks
    }

    /// Every slash command.
    pub fn commands(&self) -> &Commands {
        &self.core.commands
    }

    /// Every agent.
    pub fn registry(&self) -> &Registry {
        &self.core.registry
    }

    /// The configuration the runtime runs on.
    pub fn config(&self) -> &Config {
        &self.core.config
    }

    /// The directories the runtime uses.
    pub fn paths(&self) -> &taskforce_agents::config::Paths {
        &self.core.paths
    }

    /// The MCP servers: their status and tools; add, connect and disconnect them.
    pub fn mcp(&self) -> &Mcp {
        &self.core.mcp
    }

    /// The model providers: which exist and which can make models.
    pub fn providers(&self) -> &Providers {
        &self.core.providers
    }
}
