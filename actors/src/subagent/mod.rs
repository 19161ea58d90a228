//! Running subagents: a task call's child from its admission to its result. A call waits for a
//! running slot ([`admission`]), starts its child session through the supervisor and follows
//! it until it answers ([`call`], [`follow`]) under its time limits ([`clock`]); a background
//! child runs on its own and its result is delivered into its parent later ([`background`]).
//! [`guard`] says whether a session may delegate at all. [`Subagents`] owns all the state this
//! needs; sessions reach it through [`crate::core::Children`].

mod admission;
mod answer;
mod background;
mod call;
mod clock;
mod follow;
mod guard;
mod placed;

pub(crate) use admission::Share;
pub(crate) use guard::is_within;
pub use placed::{PlacedEnd, PlacedWork, Placement};

use std::sync::{Arc, OnceLock};

use actix::Addr;
use futures::future::BoxFuture;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;
use taskforce_agents::tool::{Delegate, TaskError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::core::{Children, Core};
use crate::id_map::IdMap;
use crate::supervisor::{Places, SessionStopped, Supervisor};

use admission::Limits;
use call::SubagentDelegate;
use clock::Clocks;

/// The subagents of one runtime: the running-slot limits, the clocks of running children, the
/// background children and their deliveries.
pub(crate) struct Subagents {
    core: Arc<Core>,
    supervisor: Addr<Supervisor>,
    /// The arbiters sessions run on: a root's task calls are spread over them.
    places: Arc<Places>,
    /// Running-children and per-tree limits of task calls.
    limits: Arc<Limits>,
    /// The clocks of running children, by child.
    clocks: Clocks,
    /// Background children waiting for a running slot: cancelling their tree (through the
    /// supervisor, which shares this map) cancels these.
    queued: Arc<IdMap<CancellationToken>>,
    /// Background children of this runtime whose result is not delivered yet, with their
    /// parent: a call waits for those of its child's subtree.
    background: IdMap<SessionId>,
    /// Counts changes of `background`, so that a call waiting on it wakes when it changes.
    background_changed: watch::Sender<u64>,
    /// Background children whose end is not recorded yet: their channel closes once it is.
    unrecorded: IdMap<watch::Receiver<()>>,
    /// One delivery of background results into a parent at a time (by parent).
    deliveries: IdMap<Arc<tokio::sync::Mutex<()>>>,
    /// How deep each session seen sits in its tree (root = 0); a session's parent never changes.
    depths: IdMap<u32>,
    /// The cluster this node has joined, if any: where calls go when the node is full.
    placement: OnceLock<Arc<dyn Placement>>,
    /// This node's name in its cluster.
    node: OnceLock<String>,
}

impl Subagents {
    /// The subagents of the runtime of `core`, started through `supervisor`, which cancels the
    /// children of `queued` with their trees.
    pub(crate) fn new(
        core: Arc<Core>,
        supervisor: Addr<Supervisor>,
        places: Arc<Places>,
        queued: Arc<IdMap<CancellationToken>>,
    ) -> Arc<Self> {
        let limits = Arc::new(Limits::new(&core.config.subagent));
        Arc::new(Subagents {
            core,
            supervisor,
            places,
            limits,
            clocks: IdMap::default(),
            queued,
            background: IdMap::default(),
            background_changed: watch::Sender::new(0),
            unrecorded: IdMap::default(),
            deliveries: IdMap::default(),
            depths: IdMap::default(),
            placement: OnceLock::new(),
            node: OnceLock::new(),
        })
    }

    /// A new root tree with no descendants: its first task call need not count them.
    pub(crate) fn new_tree(&self, root: &SessionId) {
        self.limits.seed_tree(root, 0);
    }

    /// Forgets the per-tree counts of deleted roots.
    pub(crate) fn forget_trees(&self, roots: &[SessionId]) {
        self.limits.forget_trees(roots);
    }

    /// Running-child slots in use and in all (`[subagent] max_total`).
    pub(crate) fn slots(&self) -> (usize, usize) {
        self.limits.usage()
    }

    /// Nothing of this runtime's background work is left: none queued, running or undelivered.
    pub(crate) fn is_quiet(&self) -> bool {
        self.queued.is_empty() && self.unrecorded.is_empty() && self.background.is_empty()
    }

    /// Cancels every background child still waiting for a slot.
    pub(crate) fn cancel_queued(&self) {
        for queued in self.queued.iter() {
            queued.value().cancel();
        }
    }

    /// A watch that changes whenever a background child of the runtime is queued, or its
    /// result delivered (or given up).
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.background_changed.subscribe()
    }

    /// Records that background child `child` of `parent` has a result to deliver.
    fn background_started(&self, child: &SessionId, parent: &SessionId) {
        self.background.insert(child.clone(), parent.clone());
        self.background_changed
            .send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records that background child `child`'s result is delivered (or never will be).
    fn background_ended(&self, child: &SessionId) {
        self.background.remove(child);
        self.background_changed
            .send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Children for Subagents {
    fn delegate(self: Arc<Self>, parent: Arc<Session>) -> Arc<dyn Delegate> {
        Arc::new(SubagentDelegate::new(self, parent))
    }

    fn guard<'a>(&'a self, session: &'a Session) -> BoxFuture<'a, Option<TaskError>> {
        Box::pin(self.task_guard(session))
    }

    fn hold_clock(&self, session: &SessionId) -> Option<Box<dyn Send>> {
        clock::clock_of(&self.clocks, session).map(|c| Box::new(c.hold()) as Box<dyn Send>)
    }

    fn stopped(&self, session: &SessionId) {
        self.supervisor.do_send(SessionStopped {
            id: session.clone(),
        });
    }
}
