//! Admission of task calls: how many children may run at once per parent
//! (`subagent.max_concurrent`) and in the whole runtime (`subagent.max_total`), and how many
//! children one root session tree may create (`subagent.max_per_session`).
//!
//! Calls over a running limit wait in one FIFO queue: whenever a slot frees, the queue is
//! scanned in arrival order and every waiter whose parent and the runtime both have room is
//! admitted, so calls of one parent start in the order they were made and a full parent never
//! holds up another parent's calls. While it waits, the parent's task part shows
//! `metadata.queued: true`; it turns `false` once the call is admitted. A waiting call that is
//! cancelled leaves the queue. The run-time timers (`subagent.timeout`, `idle_timeout`) start
//! only when the call is admitted.
//!
//! Nesting never makes a tree wait on itself: a child that holds a slot lends its share of
//! `max_total` while it waits for task calls of its own (queued or running), so its children
//! can run in it. When its last call ends it takes its share back before it goes on, ahead of
//! every new call (it waits only while other work runs, which ends or lends in turn). A child
//! may thus be running again while the children that ran in its place still finish, briefly
//! over `max_total` by the ones coming back; `max_concurrent` counts a parent's children,
//! whoever runs.
//!
//! In a cluster ([`Limits::place_elsewhere`]), a call that may leave this node and finds its
//! parent with room but the node full is not kept waiting here: it is admitted to run
//! elsewhere (its parent's count goes up, the node's does not) and its child goes to the
//! cluster's work queue. Every node takes work from that queue only while it has room that
//! none of its own calls wants ([`Limits::room`], [`Limits::try_share`]).
//!
//! The per-tree count covers the children this runtime created plus, the first time a tree is
//! seen, the descendants already in the store (read by one walk, which the calls that arrive
//! meanwhile wait for: a step of 1,000 calls reads the store once, not once per call); a root
//! this runtime creates starts at zero without a read, and a deleted root's count is dropped. A
//! call that would pass it fails at once with `SUBAGENT_LIMIT_REACHED`; resuming an existing
//! child (`session_id`) creates nothing and is not counted.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use taskforce_agents::config::SubagentConfig;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolMetadata;
use taskforce_agents::tool::{TaskError, TaskErrorCode, TaskFailure, ToolError};
use tokio::sync::{Notify, OnceCell};

mod admit;
mod guards;

pub(crate) use admit::{Call, admit, reserve};
pub(crate) use guards::{Aside, Lease, Reservation, Share, Slot, Waiting};

/// Why a task call may not start a child.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The root tree has created `subagent.max_per_session` children; not retryable in that
    /// tree.
    #[error(
        "this session tree has already created {created} subagents and subagent.max_per_session is {limit}: no more subagents can be started in it; do the remaining work yourself"
    )]
    TreeFull {
        /// How many children the tree created.
        created: usize,
        /// The limit.
        limit: usize,
    },
}

impl From<LimitError> for ToolError {
    fn from(e: LimitError) -> Self {
        ToolError::Task(Box::new(TaskFailure {
            error: TaskError::new(TaskErrorCode::SubagentLimitReached, e.to_string()),
            metadata: ToolMetadata::new(),
            cause: None,
        }))
    }
}

/// The limits of one runtime and who holds or waits for a slot.
pub(crate) struct Limits {
    per_parent: usize,
    total: usize,
    per_tree: usize,
    /// Calls that may leave the node run elsewhere when it is full (a cluster node).
    placing: AtomicBool,
    /// Told whenever the node has room after admitting what fits.
    freed: Notify,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Running children by parent.
    running: HashMap<SessionId, usize, foldhash::fast::RandomState>,
    /// Shares of `max_total` in use.
    total: usize,
    /// The children holding slots, and which of them wait for calls of their own.
    holders: HashMap<SessionId, Holder, foldhash::fast::RandomState>,
    /// Children coming back from their calls (first), then calls waiting for a slot; oldest
    /// first in each.
    queue: VecDeque<Ticket>,
    /// Tickets admitted whose caller has not yet taken its slot, and where their child runs.
    granted: HashMap<u64, Place, foldhash::fast::RandomState>,
    next: u64,
    /// Children created (or reserved) by root session.
    created: HashMap<SessionId, usize, foldhash::fast::RandomState>,
    /// The store walks under way that start a tree's count (see [`Limits::seeding`]).
    seeding: HashMap<SessionId, Arc<OnceCell<()>>, foldhash::fast::RandomState>,
}

struct Ticket {
    id: u64,
    kind: Kind,
    wake: Arc<Notify>,
}

/// What a ticket waits for.
enum Kind {
    /// A slot for `child` under `parent`; `roams`: it may run on another node.
    Call {
        parent: SessionId,
        child: SessionId,
        roams: bool,
    },
    /// The share `child` lent while it waited for its calls.
    Return { child: SessionId },
}

/// Where an admitted call's child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// On this node, in a share of its `max_total`.
    Here,
    /// On whichever node of the cluster takes it from the work queue.
    Elsewhere,
}

/// A child that holds slots.
#[derive(Debug, Default, Clone, Copy)]
struct Holder {
    /// Slots held for it (more than one only when calls continue it at once).
    held: usize,
    /// Its own task calls under way; while any are, its share is lent.
    away: usize,
}

impl Holder {
    /// Its shares of `max_total` in use.
    fn units(self) -> usize {
        if self.away > 0 { 0 } else { self.held }
    }
}

impl Limits {
    /// The limits of `config`.
    pub(crate) fn new(config: &SubagentConfig) -> Self {
        Limits {
            per_parent: config.max_concurrent.max(1) as usize,
            total: config.max_total.max(1) as usize,
            per_tree: config.max_per_session.max(1) as usize,
            placing: AtomicBool::new(false),
            freed: Notify::new(),
            state: Mutex::new(State::default()),
        }
    }

    /// Shares of `max_total` in use, and `max_total`.
    pub(crate) fn usage(&self) -> (usize, usize) {
        (self.state().total, self.total)
    }

    /// From now on, calls that may leave the node run elsewhere instead of waiting for room
    /// here (the node has joined a cluster).
    pub(crate) fn place_elsewhere(&self) {
        self.placing.store(true, Ordering::Relaxed);
        let mut state = self.state();
        self.pump(&mut state);
    }

    fn placing(&self) -> bool {
        self.placing.load(Ordering::Relaxed)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the tree of `root` has a count yet.
    pub(crate) fn knows_tree(&self, root: &SessionId) -> bool {
        self.state().created.contains_key(root)
    }

    /// Starts the count of `root`'s tree at `stored` unless it has one.
    pub(crate) fn seed_tree(&self, root: &SessionId, stored: usize) {
        let mut state = self.state();
        state.created.entry(root.clone()).or_insert(stored);
        state.seeding.remove(root);
    }

    /// Drops the counts of deleted trees.
    pub(crate) fn forget_trees(&self, roots: &[SessionId]) {
        let mut state = self.state();
        for root in roots {
            state.created.remove(root);
        }
    }

    /// The one walk of the store that starts `root`'s count: the calls that need it while it
    /// runs wait for it instead of walking the tree again each.
    pub(crate) fn seeding(&self, root: &SessionId) -> Arc<OnceCell<()>> {
        self.state()
            .seeding
            .entry(root.clone())
            .or_default()
            .clone()
    }

    /// Counts one more child in `root`'s tree, or fails when the tree is full. Dropping the
    /// reservation without [`Reservation::keep`] gives it back.
    pub(crate) fn reserve(self: &Arc<Self>, root: &SessionId) -> Result<Reservation, LimitError> {
        let mut state = self.state();
        let created = state.created.entry(root.clone()).or_insert(0);
        if *created >= self.per_tree {
            return Err(LimitError::TreeFull {
                created: *created,
                limit: self.per_tree,
            });
        }
        *created += 1;
        Ok(Reservation {
            limits: self.clone(),
            root: Some(root.clone()),
            shared: None,
        })
    }

    /// A child counted in `root`'s tree in `store`, shared by the nodes of a cluster; dropping
    /// the reservation without [`Reservation::keep`] takes it back there.
    pub(crate) fn shared_reservation(
        self: &Arc<Self>,
        root: &SessionId,
        store: Arc<dyn crate::store::Store>,
    ) -> Reservation {
        Reservation {
            limits: self.clone(),
            root: Some(root.clone()),
            shared: Some(store),
        }
    }

    /// `subagent.max_per_session`.
    pub(crate) fn per_tree(&self) -> usize {
        self.per_tree
    }

    /// Joins the queue for a running slot on this node for `child` under `parent`; admitted
    /// at once when there is room.
    pub(crate) fn enqueue(self: &Arc<Self>, parent: &SessionId, child: &SessionId) -> Waiting {
        self.join(parent, child, false)
    }

    /// Joins the queue for a running slot for `child` under `parent`, on this node or, when
    /// it is full and in a cluster, on another (see [`Waiting::admitted`]'s slot).
    pub(crate) fn enqueue_anywhere(
        self: &Arc<Self>,
        parent: &SessionId,
        child: &SessionId,
    ) -> Waiting {
        self.join(parent, child, true)
    }

    fn join(self: &Arc<Self>, parent: &SessionId, child: &SessionId, roams: bool) -> Waiting {
        let wake = Arc::new(Notify::new());
        let mut state = self.state();
        let id = state.next;
        state.next += 1;
        state.queue.push_back(Ticket {
            id,
            kind: Kind::Call {
                parent: parent.clone(),
                child: child.clone(),
                roams,
            },
            wake: wake.clone(),
        });
        self.pump(&mut state);
        Waiting {
            limits: self.clone(),
            id,
            parent: parent.clone(),
            child: child.clone(),
            wake,
            done: false,
        }
    }

    /// Lends `caller`'s share while a task call of its own is under way (a caller holding no
    /// slot, a root, has nothing to lend); the share comes back through [`Aside::back`].
    pub(crate) fn step_aside(self: &Arc<Self>, caller: &SessionId) -> Aside {
        let mut state = self.state();
        let lent = match state.holders.get_mut(caller) {
            Some(h) => {
                let before = h.units();
                h.away += 1;
                let freed = before - h.units();
                state.total = state.total.saturating_sub(freed);
                self.pump(&mut state);
                true
            }
            None => false,
        };
        Aside {
            limits: self.clone(),
            caller: caller.clone(),
            done: !lent,
        }
    }

    /// Waits until the node has room that none of its own calls takes.
    pub(crate) async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            if self.state().total < self.total {
                return;
            }
            freed.await;
        }
    }

    /// How many more shares of `max_total` are free now.
    pub(crate) fn free(&self) -> usize {
        self.total.saturating_sub(self.state().total)
    }

    /// A share of the node's `max_total` for work taken from the cluster's queue, if it has
    /// room now.
    pub(crate) fn try_share(self: &Arc<Self>) -> Option<Share> {
        let mut state = self.state();
        if state.total >= self.total {
            return None;
        }
        state.total += 1;
        Some(Share {
            limits: self.clone(),
            given: false,
        })
    }

    /// Admits every queued ticket that fits, oldest first (returns before calls); in a
    /// cluster, a call that may leave and finds only the node full is admitted elsewhere.
    fn pump(&self, state: &mut State) {
        let placing = self.placing();
        let mut i = 0;
        while i < state.queue.len() {
            let room = state.total < self.total;
            if !room && !placing {
                break;
            }
            let place = match &state.queue[i].kind {
                Kind::Call { parent, .. }
                    if state.running.get(parent).copied().unwrap_or(0) >= self.per_parent =>
                {
                    None
                }
                _ if room => Some(Place::Here),
                Kind::Call { roams: true, .. } => Some(Place::Elsewhere),
                _ => None,
            };
            let Some(place) = place else {
                i += 1;
                continue;
            };
            let Some(ticket) = state.queue.remove(i) else {
                break;
            };
            match ticket.kind {
                Kind::Call { parent, child, .. } => {
                    *state.running.entry(parent).or_insert(0) += 1;
                    if place == Place::Here {
                        Self::hold(state, &child);
                    }
                }
                Kind::Return { child } => Self::come_back(state, &child),
            }
            state.granted.insert(ticket.id, place);
            ticket.wake.notify_one();
        }
        if state.total < self.total {
            self.freed.notify_waiters();
        }
    }

    /// One more slot held for `child`, counted in the node's total unless its share is lent.
    fn hold(state: &mut State, child: &SessionId) {
        let h = state.holders.entry(child.clone()).or_default();
        let before = h.units();
        h.held += 1;
        state.total += h.units() - before;
    }

    /// `child`'s last call ended: its share is in use again (the caller checked for room, or
    /// takes it regardless when its call was cut short).
    fn come_back(state: &mut State, child: &SessionId) {
        if let Some(h) = state.holders.get_mut(child) {
            let before = h.units();
            h.away = h.away.saturating_sub(1);
            let after = h.units();
            state.total += after - before;
            if h.held == 0 && h.away == 0 {
                state.holders.remove(child);
            }
        }
    }

    /// Frees a slot of `child` under `parent` (of the node's too when it ran `Here`) and
    /// admits whoever fits now.
    fn release(&self, state: &mut State, parent: &SessionId, child: &SessionId, place: Place) {
        if let Some(n) = state.running.get_mut(parent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.running.remove(parent);
            }
        }
        if place == Place::Here {
            self.unhold(state, child);
        } else {
            self.pump(state);
        }
    }

    /// Frees one slot held for `child` and admits whoever fits now.
    fn unhold(&self, state: &mut State, child: &SessionId) {
        if let Some(h) = state.holders.get_mut(child) {
            let before = h.units();
            h.held = h.held.saturating_sub(1);
            state.total = state.total.saturating_sub(before - h.units());
            if h.held == 0 && h.away == 0 {
                state.holders.remove(child);
            }
        }
        self.pump(state);
    }

    /// Whether `child`'s share can be taken back now: room, and no one coming back before it.
    fn room_to_return(&self, state: &State) -> bool {
        state.total < self.total
            && !state
                .queue
                .iter()
                .any(|t| matches!(t.kind, Kind::Return { .. }))
    }

    /// Queues `child`'s return behind the returns already waiting, ahead of every call.
    fn queue_return(state: &mut State, child: &SessionId, wake: Arc<Notify>) -> u64 {
        let id = state.next;
        state.next += 1;
        let at = state
            .queue
            .iter()
            .position(|t| !matches!(t.kind, Kind::Return { .. }))
            .unwrap_or(state.queue.len());
        state.queue.insert(
            at,
            Ticket {
                id,
                kind: Kind::Return {
                    child: child.clone(),
                },
                wake,
            },
        );
        id
    }

    /// How many children run under `parent` and in total, and how many calls wait.
    #[cfg(test)]
    fn counts(&self, parent: &SessionId) -> (usize, usize, usize) {
        let state = self.state();
        (
            state.running.get(parent).copied().unwrap_or(0),
            state.total,
            state.queue.len(),
        )
    }
}

#[cfg(test)]
mod tests;
