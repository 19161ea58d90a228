//! The state every actor of one runtime shares.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix::Addr;
use dashmap::DashMap;
use taskforce_agents::agent::{AgentInfo, Registry};
use taskforce_agents::config::{Config, Paths};
use taskforce_agents::id::SessionId;
use taskforce_agents::provider::Providers;
use taskforce_agents::tool::Tool;

use crate::bus::{BusHandle, SessionStatus};
use crate::hooks::Hooks;
use crate::permission::PermissionBroker;
use crate::store::Store;
use crate::supervisor::Supervisor;

/// A concurrent map keyed by session id, hashed with a fast seeded hasher (these maps are
/// touched on every event and status change).
pub(crate) type IdMap<V> = DashMap<SessionId, V, foldhash::fast::RandomState>;

/// Shared services: store, bus, agents, providers, tools, and the supervisor's address.
pub(crate) struct Core {
    pub store: Arc<dyn Store>,
    pub bus: BusHandle,
    pub broker: Arc<PermissionBroker>,
    pub registry: Arc<Registry>,
    pub providers: Arc<Providers>,
    pub config: Arc<Config>,
    pub paths: Paths,
    pub tools: Vec<Arc<dyn Tool>>,
    /// The name of each of `tools` (same order), shared by every request that offers it.
    pub names: Vec<Arc<str>>,
    /// The JSON schema of each of `tools` (same order), built once.
    pub schemas: Vec<Arc<serde_json::Value>>,
    /// The description of each of `tools` (same order) for each agent that ran, built once.
    pub descriptions: DashMap<String, Vec<Arc<str>>, foldhash::fast::RandomState>,
    pub supervisor: OnceLock<Addr<Supervisor>>,
    /// The project the sessions belong to (its root directory's path).
    pub project_id: String,
    /// How long an idle session actor lives before it stops.
    pub idle_stop: Duration,
    /// How often streaming text is written to disk.
    pub flush_every: Duration,
    /// The first wait before retrying a failed model call (it doubles each time).
    pub retry_base: Duration,
    /// The status of every session that is not idle.
    pub statuses: IdMap<SessionStatus>,
    /// How deep each session seen sits in its tree (root = 0); a session's parent never changes.
    pub depths: IdMap<u32>,
    /// Every slash command.
    pub commands: taskforce_agents::command::Commands,
    /// Embedders' hooks, in registration order.
    pub hooks: std::sync::RwLock<Vec<Arc<dyn Hooks>>>,
    /// Running-children and per-tree limits of task calls.
    pub limits: Arc<crate::supervisor::Limits>,
    /// The clocks of running children (see `supervisor::timeout`), by child.
    pub clocks: crate::supervisor::Clocks,
    /// Background children waiting for a running slot: cancelling their tree cancels these.
    pub queued: IdMap<tokio_util::sync::CancellationToken>,
    /// Background children of this runtime whose result is not delivered yet, with their
    /// parent: a call waits for those of its child's subtree.
    pub background: IdMap<SessionId>,
    /// Background children whose end is not recorded yet: their channel closes once it is.
    pub unrecorded: IdMap<tokio::sync::watch::Receiver<()>>,
    /// One delivery of background results into a parent at a time (by parent).
    pub deliveries: IdMap<Arc<tokio::sync::Mutex<()>>>,
    /// This runtime's id and the lock that tells other runtimes it is alive.
    pub owner: crate::runtime::OwnerLock,
    /// The runtime is stopping: it takes no new prompts and delivers no background results
    /// (they wait for the next runtime).
    pub stopping: std::sync::atomic::AtomicBool,
}

impl Core {
    /// The supervisor; set right after the core is built, before any session runs.
    pub fn supervisor(&self) -> Option<&Addr<Supervisor>> {
        self.supervisor.get()
    }

    /// The registered hooks (a snapshot).
    pub fn hooks(&self) -> Vec<Arc<dyn Hooks>> {
        self.hooks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The JSON schema of `tool`'s arguments: built once for the runtime's tools.
    pub fn schema(&self, tool: &dyn Tool) -> Arc<serde_json::Value> {
        self.tool_index(tool)
            .and_then(|i| self.schemas.get(i))
            .cloned()
            .unwrap_or_else(|| Arc::new(tool.parameters()))
    }

    /// `tool`'s description for the model when `agent` runs it: built once per agent.
    pub fn description(&self, tool: &dyn Tool, agent: &AgentInfo) -> Arc<str> {
        let Some(i) = self.tool_index(tool) else {
            return tool.description(agent, &self.registry).into();
        };
        if let Some(known) = self.descriptions.get(&agent.name)
            && let Some(d) = known.get(i)
        {
            return d.clone();
        }
        let all: Vec<Arc<str>> = self
            .tools
            .iter()
            .map(|t| Arc::from(t.description(agent, &self.registry)))
            .collect();
        let d = all[i].clone();
        self.descriptions.insert(agent.name.clone(), all);
        d
    }

    /// Where `tool` sits among the runtime's tools (and its schema and descriptions).
    fn tool_index(&self, tool: &dyn Tool) -> Option<usize> {
        self.tools.iter().position(|t| t.id() == tool.id())
    }

    /// The directory sessions run in.
    pub fn directory(&self) -> PathBuf {
        self.paths.cwd.clone()
    }
}
