//! The state every actor of one runtime shares.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use dashmap::DashMap;
use futures::future::BoxFuture;
use indexmap::IndexMap;
use taskforce_agents::agent::{AgentInfo, Registry};
use taskforce_agents::config::{Config, Paths};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;
use taskforce_agents::permission::Layers;
use taskforce_agents::provider::Providers;
use taskforce_agents::tool::{Delegate, TaskError, Tool};

use crate::bus::{BusHandle, SessionStatus};
use crate::hooks::Hooks;
use crate::id_map::IdMap;
use crate::owner::OwnerLock;
use crate::permission::PermissionBroker;
use crate::store::Store;

/// What a session asks of the machinery above it that runs sessions and their children (the
/// supervisor and the subagent module); set once when the runtime starts.
pub(crate) trait Children: Send + Sync {
    /// What starts the subagents of `parent`'s task calls.
    fn delegate(self: Arc<Self>, parent: Arc<Session>) -> Arc<dyn Delegate>;
    /// Why `session` may not start subagents now, if it may not.
    fn guard<'a>(&'a self, session: &'a Session) -> BoxFuture<'a, Option<TaskError>>;
    /// Stops the idle clock of `session` (and its callers') while the returned value lives,
    /// when it runs as a child.
    fn hold_clock(&self, session: &SessionId) -> Option<Box<dyn Send>>;
    /// `session`'s actor has stopped.
    fn stopped(&self, session: &SessionId);
}

/// Shared services: store, bus, agents, providers, tools, and the way to the children.
pub(crate) struct Core {
    pub store: Arc<dyn Store>,
    pub bus: BusHandle,
    pub broker: Arc<PermissionBroker>,
    /// The questions waiting for the user.
    pub questions: Arc<crate::question::QuestionBroker>,
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
    /// The tools last offered for a set of rules (see [`LastOffered`]).
    pub offered: LastOffered,
    /// The MCP servers, whose tools are offered after `tools` (see [`Core::tool`]).
    pub mcp: crate::mcp::Mcp,
    /// The supervisor and subagents, once started.
    pub children: OnceLock<Arc<dyn Children>>,
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
    /// Every slash command.
    pub commands: taskforce_agents::command::Commands,
    /// Embedders' hooks, in registration order.
    pub hooks: std::sync::RwLock<Vec<Arc<dyn Hooks>>>,
    /// This runtime's id and the lock that tells other runtimes it is alive.
    pub owner: OwnerLock,
    /// The runtime is stopping: it takes no new prompts and delivers no background results
    /// (they wait for the next runtime).
    pub stopping: std::sync::atomic::AtomicBool,
    /// Snapshots of the worktree, for undoing turns.
    pub snapshots: crate::snapshot::Snapshots,
    /// Where new messages move their session's `time.updated`.
    pub toucher: crate::touch::Toucher,
}

impl Core {
    /// The supervisor and subagents; set right after the core is built, before any session
    /// runs.
    pub fn children(&self) -> Option<&Arc<dyn Children>> {
        self.children.get()
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

    /// The tool at place `i` of the tools a step may offer: the built-in `tools`, then `mcp`
    /// (the MCP tools connected when the step began, see [`crate::mcp::Mcp::tools`]).
    pub fn tool<'a>(&'a self, mcp: &'a [Arc<dyn Tool>], i: usize) -> Option<&'a Arc<dyn Tool>> {
        match i.checked_sub(self.tools.len()) {
            None => self.tools.get(i),
            Some(j) => mcp.get(j),
        }
    }

    /// Every tool a step may offer, in place order: the built-in ones, then `mcp`.
    pub fn all_tools<'a>(
        &'a self,
        mcp: &'a [Arc<dyn Tool>],
    ) -> impl Iterator<Item = &'a Arc<dyn Tool>> {
        self.tools.iter().chain(mcp.iter())
    }

    /// The name the model is told for the tool at place `i` (see [`Core::tool`]).
    pub fn tool_name(&self, mcp: &[Arc<dyn Tool>], i: usize) -> Option<Arc<str>> {
        match self.names.get(i) {
            Some(name) => Some(name.clone()),
            None => self.tool(mcp, i).map(|t| Arc::from(t.id())),
        }
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

/// The tools offered the last time they were worked out: for which rules, prompt switches and
/// MCP tools, and their places (see [`Core::tool`]). Sessions with the same rules (the children
/// of one call, say) find them again with a comparison instead of matching every tool against
/// every rule.
#[derive(Default)]
pub(crate) struct LastOffered(Mutex<Option<Offered>>);

/// One answer of [`LastOffered`] and what it was for.
struct Offered {
    rules: Layers,
    switches: Option<IndexMap<String, bool>>,
    mcp: Arc<[Arc<dyn Tool>]>,
    tools: Arc<[usize]>,
}

impl LastOffered {
    /// The tools offered under `rules`, with the prompt's `switches` and the `mcp` tools: the
    /// last answer when it was for the same ones, else `work_out`'s (kept as the last).
    pub fn get_or(
        &self,
        rules: &Layers,
        switches: &Option<IndexMap<String, bool>>,
        mcp: &Arc<[Arc<dyn Tool>]>,
        work_out: impl FnOnce() -> Vec<usize>,
    ) -> Arc<[usize]> {
        if let Some(known) = &*self.0.lock().unwrap_or_else(PoisonError::into_inner)
            && Arc::ptr_eq(&known.mcp, mcp)
            && known.rules == *rules
            && known.switches == *switches
        {
            return known.tools.clone();
        }
        let tools: Arc<[usize]> = work_out().into();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Offered {
            rules: rules.clone(),
            switches: switches.clone(),
            mcp: mcp.clone(),
            tools: tools.clone(),
        });
        tools
    }
}

#[cfg(test)]
mod tests {
    use taskforce_agents::permission::{Action, Rule};

    use super::*;

    #[test]
    fn tools_are_worked_out_again_only_when_the_rules_switches_or_mcp_tools_differ() {
        let last = LastOffered::default();
        let mcp: Arc<[Arc<dyn Tool>]> = Arc::from(Vec::new());
        let rules = |action| Layers::single(vec![Rule::new("bash", "*", action)]);
        let mut worked = 0;
        let mut offered = |rules: &Layers, switches: &Option<IndexMap<String, bool>>, answer| {
            last.get_or(rules, switches, &mcp, || {
                worked += 1;
                vec![answer]
            })
        };
        assert_eq!(*offered(&rules(Action::Allow), &None, 1), [1]);
        // Equal rules made apart are the same rules.
        assert_eq!(*offered(&rules(Action::Allow), &None, 2), [1]);
        assert_eq!(*offered(&rules(Action::Deny), &None, 3), [3]);
        let off = Some(IndexMap::from([("bash".to_string(), false)]));
        assert_eq!(*offered(&rules(Action::Deny), &off, 4), [4]);
        assert_eq!(*offered(&rules(Action::Deny), &off, 5), [4]);
        assert_eq!(worked, 3);
        let other: Arc<[Arc<dyn Tool>]> = Arc::from(Vec::new());
        let again = last.get_or(&rules(Action::Deny), &off, &other, || vec![6]);
        assert_eq!(*again, [6], "other MCP tools are worked out again");
    }
}
