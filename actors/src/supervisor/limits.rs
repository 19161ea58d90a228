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
//! A parent that waits for its own children keeps its slot, so with nesting a `max_total`
//! smaller than the tree's depth can make a tree wait on itself; keep `max_total` above
//! `max_depth`.
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
    /// Running children in the runtime.
    total: usize,
    /// Calls waiting for a slot, oldest first.
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
    parent: SessionId,
    wake: Arc<Notify>,
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

    /// Joins the queue for a running slot under `parent`; admitted at once when there is room.
    pub(crate) fn enqueue(self: &Arc<Self>, parent: &SessionId) -> Waiting {
        let wake = Arc::new(Notify::new());
        let mut state = self.state();
        let id = state.next;
        state.next += 1;
        state.queue.push_back(Ticket {
            id,
            parent: parent.clone(),
            wake: wake.clone(),
        });
        self.pump(&mut state);
        Waiting {
            limits: self.clone(),
            id,
            parent: parent.clone(),
            wake,
            done: false,
        }
    }

    /// Admits every queued call that fits, oldest first.
    fn pump(&self, state: &mut State) {
        let mut i = 0;
        while i < state.queue.len() && state.total < self.total {
            let parent_running = state
                .running
                .get(&state.queue[i].parent)
                .copied()
                .unwrap_or(0);
            if parent_running >= self.per_parent {
                i += 1;
                continue;
            }
            let Some(ticket) = state.queue.remove(i) else {
                break;
            };
            *state.running.entry(ticket.parent.clone()).or_insert(0) += 1;
            state.total += 1;
            state.granted.insert(ticket.id);
            ticket.wake.notify_one();
        }
    }

    /// Frees a slot of `parent` and admits whoever fits now.
    fn release(&self, state: &mut State, parent: &SessionId) {
        if let Some(n) = state.running.get_mut(parent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.running.remove(parent);
            }
        }
        state.total = state.total.saturating_sub(1);
        self.pump(state);
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

/// A call in the queue; dropping it leaves the queue (or frees a slot granted meanwhile).
pub(crate) struct Waiting {
    limits: Arc<Limits>,
    id: u64,
    parent: SessionId,
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
            self.limits.release(&mut state, &self.parent);
        } else {
            state.queue.retain(|t| t.id != self.id);
        }
    }
}

/// A running slot; dropping it lets the next call in.
pub(crate) struct Slot {
    limits: Arc<Limits>,
    parent: SessionId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.limits.state();
        self.limits.release(&mut state, &self.parent);
    }
}

/// What a task call holds while its child runs.
pub(crate) struct Admission {
    /// The running slot.
    pub slot: Slot,
    /// The child's place in its tree's count (new children only).
    pub reservation: Option<Reservation>,
}

/// Admits a task call of `parent` (in the tree of `root`) that starts a `new` child or resumes
/// one: counts a new child in its tree (failing at once when the tree is full), then waits for
/// a running slot, showing `queued: true` on the call's part meanwhile. Cancelling `ctx.abort`
/// while waiting leaves the queue with `ToolError::Aborted`.
pub(crate) async fn admit(
    core: &Core,
    ctx: &ToolContext,
    parent: &SessionId,
    root: &SessionId,
    new: bool,
) -> Result<Admission, ToolError> {
    let limits = &core.limits;
    let reservation = reserve(core, root, new).await?;
    let waiting = limits.enqueue(parent);
    if waiting.is_admitted() {
        let slot = waiting.admitted().await;
        return Ok(Admission { slot, reservation });
    }
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
        let a = l.enqueue(&p).admitted().await;
        let b = l.enqueue(&p).admitted().await;
        let c = l.enqueue(&p);
        let d = l.enqueue(&p);
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
        let p1 = l.enqueue(&p).admitted().await;
        let p2 = l.enqueue(&p);
        let q1 = l.enqueue(&q).admitted().await;
        let r1 = l.enqueue(&r);
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
        let a = l.enqueue(&p).admitted().await;
        let b = l.enqueue(&p);
        let c = l.enqueue(&p);
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
}
