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
//! The per-tree count covers the children this runtime created plus, the first time a tree is
//! seen, the descendants already in the store (read by one walk, which the calls that arrive
//! meanwhile wait for: a step of 1,000 calls reads the store once, not once per call); a root
//! this runtime creates starts at zero without a read, and a deleted root's count is dropped. A
//! call that would pass it fails at once with `SUBAGENT_LIMIT_REACHED`; resuming an existing
//! child (`session_id`) creates nothing and is not counted.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};
use taskforce_agents::config::SubagentConfig;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolMetadata;
use taskforce_agents::tool::{TaskError, TaskErrorCode, TaskFailure, ToolContext, ToolError};
use tokio::sync::{Notify, OnceCell};

use super::timeout::Activity;
use crate::core::Core;

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
    /// Tickets admitted whose caller has not yet taken its slot.
    granted: HashSet<u64, foldhash::fast::RandomState>,
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
    /// A slot for `child` under `parent`.
    Call { parent: SessionId, child: SessionId },
    /// The share `child` lent while it waited for its calls.
    Return { child: SessionId },
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
            state: Mutex::new(State::default()),
        }
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
        })
    }

    /// Joins the queue for a running slot for `child` under `parent`; admitted at once when
    /// there is room.
    pub(crate) fn enqueue(self: &Arc<Self>, parent: &SessionId, child: &SessionId) -> Waiting {
        let wake = Arc::new(Notify::new());
        let mut state = self.state();
        let id = state.next;
        state.next += 1;
        state.queue.push_back(Ticket {
            id,
            kind: Kind::Call {
                parent: parent.clone(),
                child: child.clone(),
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

    /// Admits every queued ticket that fits, oldest first (returns before calls).
    fn pump(&self, state: &mut State) {
        let mut i = 0;
        while i < state.queue.len() && state.total < self.total {
            if let Kind::Call { parent, .. } = &state.queue[i].kind
                && state.running.get(parent).copied().unwrap_or(0) >= self.per_parent
            {
                i += 1;
                continue;
            }
            let Some(ticket) = state.queue.remove(i) else {
                break;
            };
            match ticket.kind {
                Kind::Call { parent, child } => {
                    *state.running.entry(parent).or_insert(0) += 1;
                    let h = state.holders.entry(child).or_default();
                    let before = h.units();
                    h.held += 1;
                    state.total += h.units() - before;
                }
                Kind::Return { child } => Self::come_back(state, &child),
            }
            state.granted.insert(ticket.id);
            ticket.wake.notify_one();
        }
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

    /// Frees a slot of `child` under `parent` and admits whoever fits now.
    fn release(&self, state: &mut State, parent: &SessionId, child: &SessionId) {
        if let Some(n) = state.running.get_mut(parent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.running.remove(parent);
            }
        }
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

/// One child counted in its tree until dropped, unless kept.
pub(crate) struct Reservation {
    limits: Arc<Limits>,
    root: Option<SessionId>,
}

impl Reservation {
    /// The child was created: the count stays.
    pub(crate) fn keep(mut self) {
        self.root = None;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(root) = self.root.take()
            && let Some(n) = self.limits.state().created.get_mut(&root)
        {
            *n = n.saturating_sub(1);
        }
    }
}

/// A caller's share lent while its task call is under way; [`Aside::claim`] takes it back
/// (dropping it instead takes it back at once, room or not: the call was cut short).
pub(crate) struct Aside {
    limits: Arc<Limits>,
    caller: SessionId,
    done: bool,
}

impl Aside {
    /// The call ended: takes the caller's share back when there is room, else queues for it
    /// ahead of every call (the wait is [`Claim::wait`]). Other calls of the caller still
    /// under way keep it lent.
    pub(crate) fn claim(mut self) -> Claim {
        self.done = true;
        let wake = Arc::new(Notify::new());
        let limits = self.limits.clone();
        let mut state = limits.state();
        let waits = matches!(state.holders.get(&self.caller), Some(h) if h.away == 1 && h.held > 0)
            && !limits.room_to_return(&state);
        let id = if waits {
            Some(Limits::queue_return(&mut state, &self.caller, wake.clone()))
        } else {
            Limits::come_back(&mut state, &self.caller);
            None
        };
        Claim {
            limits: self.limits.clone(),
            caller: self.caller.clone(),
            id,
            wake,
        }
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        if !self.done {
            let mut state = self.limits.state();
            Limits::come_back(&mut state, &self.caller);
        }
    }
}

/// A caller taking its share back; dropped while it waits, it takes it regardless.
pub(crate) struct Claim {
    limits: Arc<Limits>,
    caller: SessionId,
    /// Its return ticket, while it waits.
    id: Option<u64>,
    wake: Arc<Notify>,
}

impl Claim {
    /// Waits until the share is the caller's again.
    pub(crate) async fn wait(mut self) {
        while let Some(id) = self.id {
            if self.limits.state().granted.remove(&id) {
                self.id = None;
                return;
            }
            self.wake.notified().await;
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut state = self.limits.state();
        if !state.granted.remove(&id) {
            state.queue.retain(|t| t.id != id);
            Limits::come_back(&mut state, &self.caller);
        }
    }
}

/// What a task call holds: its caller's lent share and, once admitted, its child's slot (and
/// the child's share, lent while the call waits for the child's background children). Dropped,
/// all are given up at once.
#[derive(Default)]
pub(crate) struct Lease {
    /// The caller's share, lent while the call is under way.
    pub aside: Option<Aside>,
    /// The child's running slot.
    pub slot: Option<Slot>,
    /// The child's share, lent to its background children; given up with the slot.
    pub lent: Option<Aside>,
}

impl Lease {
    /// Ends the call: the caller claims its share back before the child's slot is freed (so
    /// that no call the freed slot would let in goes first), then waits for it.
    pub(crate) async fn end(self) {
        let Lease { aside, slot, lent } = self;
        let claim = aside.map(Aside::claim);
        // The slot first: a share still lent when its slot goes is not taken back.
        drop(slot);
        drop(lent);
        if let Some(claim) = claim {
            claim.wait().await;
        }
    }
}

/// A call in the queue; dropping it leaves the queue (or frees a slot granted meanwhile).
pub(crate) struct Waiting {
    limits: Arc<Limits>,
    id: u64,
    parent: SessionId,
    child: SessionId,
    wake: Arc<Notify>,
    done: bool,
}

impl Waiting {
    /// Whether the call has its slot already.
    pub(crate) fn is_admitted(&self) -> bool {
        self.limits.state().granted.contains(&self.id)
    }

    /// Waits for the slot.
    pub(crate) async fn admitted(mut self) -> Slot {
        loop {
            {
                let mut state = self.limits.state();
                if state.granted.remove(&self.id) {
                    self.done = true;
                    return Slot {
                        limits: self.limits.clone(),
                        parent: self.parent.clone(),
                        child: self.child.clone(),
                    };
                }
            }
            self.wake.notified().await;
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = self.limits.state();
        if state.granted.remove(&self.id) {
            self.limits.release(&mut state, &self.parent, &self.child);
        } else {
            state.queue.retain(|t| t.id != self.id);
        }
    }
}

/// A running slot; dropping it lets the next call in.
pub(crate) struct Slot {
    limits: Arc<Limits>,
    parent: SessionId,
    child: SessionId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.limits.state();
        self.limits.release(&mut state, &self.parent, &self.child);
    }
}

/// What a task call holds while its child runs.
pub(crate) struct Admission {
    /// The running slot.
    pub slot: Slot,
    /// The child's place in its tree's count (new children only).
    pub reservation: Option<Reservation>,
}

/// Where a task call stands: its caller, the child it runs, the root of their tree.
pub(crate) struct Call<'a> {
    /// The calling session.
    pub parent: &'a SessionId,
    /// The child to run.
    pub child: &'a SessionId,
    /// The root of their tree.
    pub root: &'a SessionId,
    /// Whether the child is new (counted in its tree).
    pub new: bool,
    /// The caller's clock, when the caller runs as a child: held while the call waits.
    pub clock: Option<&'a Arc<Activity>>,
}

/// Admits a task `call` that starts a new child or resumes one: counts a new child in its tree
/// (failing at once when the tree is full), then waits for a running slot, showing
/// `queued: true` on the call's part meanwhile (the caller is not idle while it waits).
/// Cancelling `ctx.abort` while waiting leaves the queue with `ToolError::Aborted`.
pub(crate) async fn admit(
    core: &Core,
    ctx: &ToolContext,
    call: Call<'_>,
) -> Result<Admission, ToolError> {
    let limits = &core.limits;
    let reservation = reserve(core, call.root, call.new).await?;
    let waiting = limits.enqueue(call.parent, call.child);
    if waiting.is_admitted() {
        let slot = waiting.admitted().await;
        return Ok(Admission { slot, reservation });
    }
    let _busy = call.clock.map(Activity::hold);
    ctx.metadata(None, queued(true));
    let slot = tokio::select! {
        biased;
        () = ctx.abort.cancelled() => return Err(ToolError::Aborted),
        slot = waiting.admitted() => slot,
    };
    ctx.metadata(None, queued(false));
    Ok(Admission { slot, reservation })
}

/// Counts a `new` child in the tree of `root`, failing at once with `SUBAGENT_LIMIT_REACHED`
/// when the tree is full; resuming a child counts nothing.
pub(crate) async fn reserve(
    core: &Core,
    root: &SessionId,
    new: bool,
) -> Result<Option<Reservation>, ToolError> {
    if !new {
        return Ok(None);
    }
    let limits = &core.limits;
    if !limits.knows_tree(root) {
        limits
            .seeding(root)
            .get_or_init(|| async {
                // A call that came just after the count started finds it here.
                if !limits.knows_tree(root) {
                    limits.seed_tree(root, stored_descendants(core, root).await);
                }
            })
            .await;
    }
    Ok(Some(limits.reserve(root)?))
}

fn queued(on: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("queued".into(), Value::Bool(on));
    m
}

/// How many descendants of `root` the store holds.
async fn stored_descendants(core: &Core, root: &SessionId) -> usize {
    let mut count = 0;
    let mut stack = vec![root.clone()];
    while let Some(id) = stack.pop() {
        match core.store.children(&id).await {
            Ok(kids) => {
                count += kids.len();
                stack.extend(kids.into_iter().map(|k| k.id));
            }
            Err(e) => tracing::warn!(session = %id, "counting a tree's children failed: {e}"),
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskforce_agents::id::SessionId;

    fn limits(per_parent: u32, total: u32, per_tree: u32) -> Arc<Limits> {
        Arc::new(Limits::new(&SubagentConfig {
            max_concurrent: per_parent,
            max_total: total,
            max_per_session: per_tree,
            ..SubagentConfig::default()
        }))
    }

    #[tokio::test]
    async fn calls_over_the_parent_limit_wait_in_fifo_order() {
        let l = limits(2, 10, 100);
        let p = SessionId::new();
        let a = l.enqueue(&p, &SessionId::new()).admitted().await;
        let b = l.enqueue(&p, &SessionId::new()).admitted().await;
        let c = l.enqueue(&p, &SessionId::new());
        let d = l.enqueue(&p, &SessionId::new());
        assert!(!c.is_admitted() && !d.is_admitted());
        assert_eq!(l.counts(&p), (2, 2, 2));
        drop(a);
        assert!(c.is_admitted(), "the oldest waiter goes first");
        assert!(!d.is_admitted());
        drop(b);
        assert!(d.is_admitted());
        let (_c, _d) = (c.admitted().await, d.admitted().await);
        assert_eq!(l.counts(&p), (2, 2, 0));
    }

    #[tokio::test]
    async fn the_total_limit_spans_parents_and_a_full_parent_blocks_no_one_else() {
        let l = limits(1, 2, 100);
        let (p, q, r) = (SessionId::new(), SessionId::new(), SessionId::new());
        let p1 = l.enqueue(&p, &SessionId::new()).admitted().await;
        let p2 = l.enqueue(&p, &SessionId::new());
        let q1 = l.enqueue(&q, &SessionId::new()).admitted().await;
        let r1 = l.enqueue(&r, &SessionId::new());
        assert!(!p2.is_admitted() && !r1.is_admitted());
        drop(q1);
        assert!(r1.is_admitted(), "p is full; r is next that fits");
        assert!(!p2.is_admitted());
        drop(p1);
        assert!(p2.is_admitted());
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_queue_and_a_granted_one_frees_its_slot() {
        let l = limits(1, 10, 100);
        let p = SessionId::new();
        let a = l.enqueue(&p, &SessionId::new()).admitted().await;
        let b = l.enqueue(&p, &SessionId::new());
        let c = l.enqueue(&p, &SessionId::new());
        drop(b);
        assert_eq!(l.counts(&p), (1, 1, 1));
        drop(a);
        assert!(c.is_admitted());
        drop(c);
        assert_eq!(l.counts(&p), (0, 0, 0));
    }

    #[test]
    fn the_tree_count_fails_past_the_limit_and_gives_back_unkept_reservations() {
        let l = limits(1, 1, 2);
        let root = SessionId::new();
        l.seed_tree(&root, 1);
        let r = l.reserve(&root).unwrap();
        assert!(matches!(
            l.reserve(&root),
            Err(LimitError::TreeFull {
                created: 2,
                limit: 2
            })
        ));
        drop(r);
        l.reserve(&root).unwrap().keep();
        assert!(l.reserve(&root).is_err());
        assert!(l.reserve(&SessionId::new()).is_ok());
    }

    #[test]
    fn a_deleted_trees_count_is_forgotten() {
        let l = limits(1, 1, 2);
        let (root, other) = (SessionId::new(), SessionId::new());
        l.seed_tree(&root, 2);
        l.seed_tree(&other, 0);
        l.forget_trees(std::slice::from_ref(&root));
        assert!(!l.knows_tree(&root));
        assert!(l.knows_tree(&other));
    }

    /// `child` admitted under `parent`, its slot held.
    async fn running(l: &Arc<Limits>, parent: &SessionId, child: &SessionId) -> Slot {
        l.enqueue(parent, child).admitted().await
    }

    #[tokio::test]
    async fn a_caller_lends_its_share_to_its_own_call_and_takes_it_back_after() {
        let l = limits(10, 1, 100);
        let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
        let _middle = running(&l, &root, &middle).await;
        assert_eq!(l.counts(&root).1, 1);
        let aside = l.step_aside(&middle);
        assert_eq!(l.counts(&root).1, 0, "lent while its call runs");
        let waiting = l.enqueue(&middle, &leaf);
        assert!(waiting.is_admitted(), "the leaf runs in the middle's share");
        let lease = Lease {
            aside: Some(aside),
            slot: Some(waiting.admitted().await),
            lent: None,
        };
        lease.end().await;
        assert_eq!(l.counts(&root), (1, 1, 0), "the middle runs again");
        assert_eq!(l.counts(&middle), (0, 1, 0));
    }

    #[tokio::test]
    async fn a_returning_caller_goes_before_calls_that_waited_longer() {
        let l = limits(10, 1, 100);
        let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
        let middle_slot = running(&l, &root, &middle).await;
        let aside = l.step_aside(&middle);
        let leaf_slot = running(&l, &middle, &leaf).await;
        let other = l.enqueue(&SessionId::new(), &SessionId::new());
        assert!(!other.is_admitted());
        Lease {
            aside: Some(aside),
            slot: Some(leaf_slot),
            lent: None,
        }
        .end()
        .await;
        assert!(!other.is_admitted(), "the middle finishes its work first");
        drop(middle_slot);
        assert!(other.is_admitted());
        assert_eq!(l.counts(&root), (0, 1, 0));
    }

    #[tokio::test]
    async fn the_share_comes_back_after_the_last_of_several_calls() {
        let l = limits(10, 2, 100);
        let (root, middle) = (SessionId::new(), SessionId::new());
        let _middle = running(&l, &root, &middle).await;
        let (a1, a2) = (l.step_aside(&middle), l.step_aside(&middle));
        assert_eq!(l.counts(&root).1, 0);
        let s1 = running(&l, &middle, &SessionId::new()).await;
        let s2 = running(&l, &middle, &SessionId::new()).await;
        Lease {
            aside: Some(a1),
            slot: Some(s1),
            lent: None,
        }
        .end()
        .await;
        assert_eq!(
            l.counts(&middle),
            (1, 1, 0),
            "still lent to the second call"
        );
        Lease {
            aside: Some(a2),
            slot: Some(s2),
            lent: None,
        }
        .end()
        .await;
        assert_eq!(l.counts(&middle), (0, 1, 0), "the middle's own share only");
    }

    #[tokio::test]
    async fn a_call_cut_short_gives_everything_back_at_once() {
        let l = limits(10, 1, 100);
        let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
        let middle_slot = running(&l, &root, &middle).await;
        let aside = l.step_aside(&middle);
        let leaf_slot = running(&l, &middle, &leaf).await;
        // Its claim queued (no room while the leaf runs), then the call is cancelled.
        let claim = aside.claim();
        assert_eq!(l.counts(&root).2, 1, "the return waits");
        drop(claim);
        drop(leaf_slot);
        assert_eq!(
            l.counts(&root),
            (1, 1, 0),
            "no ticket left behind, the share is back"
        );
        drop(middle_slot);
        assert_eq!(l.counts(&root), (0, 0, 0));
        // A lease dropped whole (the caller's run ending) leaves nothing counted either.
        let middle_slot = running(&l, &root, &middle).await;
        let lease = Lease {
            aside: Some(l.step_aside(&middle)),
            slot: Some(running(&l, &middle, &leaf).await),
            lent: None,
        };
        drop(lease);
        drop(middle_slot);
        assert_eq!(l.counts(&root), (0, 0, 0));
        assert!(l.state().holders.is_empty());
    }

    #[tokio::test]
    async fn a_root_caller_holds_no_share_and_lends_nothing() {
        let l = limits(10, 1, 100);
        let (root, child) = (SessionId::new(), SessionId::new());
        let aside = l.step_aside(&root);
        let slot = running(&l, &root, &child).await;
        let other = l.enqueue(&SessionId::new(), &SessionId::new());
        assert!(!other.is_admitted(), "nothing was lent: one slot, taken");
        Lease {
            aside: Some(aside),
            slot: Some(slot),
            lent: None,
        }
        .end()
        .await;
        assert!(other.is_admitted());
    }

    #[tokio::test]
    async fn a_share_lent_to_background_children_is_given_up_with_the_slot() {
        let l = limits(10, 1, 100);
        let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
        let middle_slot = running(&l, &root, &middle).await;
        let lent = l.step_aside(&middle);
        let leaf_slot = running(&l, &middle, &leaf).await;
        assert_eq!(
            l.counts(&root),
            (1, 1, 0),
            "the leaf runs in the middle's share"
        );
        Lease {
            aside: None,
            slot: Some(middle_slot),
            lent: Some(lent),
        }
        .end()
        .await;
        assert_eq!(
            l.counts(&root),
            (0, 1, 0),
            "only the leaf counts: never two"
        );
        drop(leaf_slot);
        assert_eq!(l.counts(&root), (0, 0, 0));
        assert!(l.state().holders.is_empty());
    }
}
