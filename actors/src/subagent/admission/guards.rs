//! What a task call holds while it waits and runs: its place in its tree's count, its
//! running slot, the share it lends while it waits, and its turn in the queue.

use std::sync::Arc;

use taskforce_agents::id::SessionId;
use tokio::sync::Notify;

use super::{Limits, Place};
use crate::store::Store;

/// One child counted in its tree until dropped, unless kept.
pub(crate) struct Reservation {
    pub(super) limits: Arc<Limits>,
    pub(super) root: Option<SessionId>,
    /// Where the count is kept when the nodes of a cluster share it (else in `limits`).
    pub(super) shared: Option<Arc<dyn Store>>,
}

impl Reservation {
    /// The child was created: the count stays.
    pub(crate) fn keep(mut self) {
        self.root = None;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let Some(root) = self.root.take() else {
            return;
        };
        match self.shared.take() {
            Some(store) => {
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    handle.spawn(async move {
                        if let Err(e) = store.uncount_tree_child(&root).await {
                            tracing::warn!(%root, "cannot take back a child counted in its tree: {e}");
                        }
                    });
                }
            }
            None => {
                if let Some(n) = self.limits.state().created.get_mut(&root) {
                    *n = n.saturating_sub(1);
                }
            }
        }
    }
}

/// A caller's share lent while its task call is under way; [`Aside::claim`] takes it back
/// (dropping it instead takes it back at once, room or not: the call was cut short).
pub(crate) struct Aside {
    pub(super) limits: Arc<Limits>,
    pub(super) caller: SessionId,
    pub(super) done: bool,
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
    pub(super) limits: Arc<Limits>,
    pub(super) caller: SessionId,
    /// Its return ticket, while it waits.
    pub(super) id: Option<u64>,
    pub(super) wake: Arc<Notify>,
}

impl Claim {
    /// Waits until the share is the caller's again.
    pub(crate) async fn wait(mut self) {
        while let Some(id) = self.id {
            if self.limits.state().granted.remove(&id).is_some() {
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
        if state.granted.remove(&id).is_none() {
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
    pub(super) limits: Arc<Limits>,
    pub(super) id: u64,
    pub(super) parent: SessionId,
    pub(super) child: SessionId,
    pub(super) wake: Arc<Notify>,
    pub(super) done: bool,
}

impl Waiting {
    /// Whether the call has its slot already.
    pub(crate) fn is_admitted(&self) -> bool {
        self.limits.state().granted.contains_key(&self.id)
    }

    /// Waits for the slot.
    pub(crate) async fn admitted(mut self) -> Slot {
        loop {
            {
                let mut state = self.limits.state();
                if let Some(place) = state.granted.remove(&self.id) {
                    self.done = true;
                    return Slot {
                        limits: self.limits.clone(),
                        parent: self.parent.clone(),
                        child: self.child.clone(),
                        place,
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
        if let Some(place) = state.granted.remove(&self.id) {
            self.limits
                .release(&mut state, &self.parent, &self.child, place);
        } else {
            state.queue.retain(|t| t.id != self.id);
        }
    }
}

/// A running slot; dropping it lets the next call in.
pub(crate) struct Slot {
    pub(super) limits: Arc<Limits>,
    pub(super) parent: SessionId,
    pub(super) child: SessionId,
    pub(super) place: Place,
}

impl Slot {
    /// Whether the child is to run on another node (this one was full).
    pub(crate) fn is_elsewhere(&self) -> bool {
        self.place == Place::Elsewhere
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.limits.state();
        self.limits
            .release(&mut state, &self.parent, &self.child, self.place);
    }
}

/// A share of the node's `max_total` for work taken from the cluster's queue, held until the
/// work's child runs in it ([`Share::run`]) or it is dropped.
pub(crate) struct Share {
    pub(super) limits: Arc<Limits>,
    /// Whether a child runs in it now (its slot is the child's [`TakenRun`]).
    pub(super) given: bool,
}

impl Share {
    /// The child of taken work runs in this share: it is held for `child` (lent while the
    /// child waits for calls of its own) until the returned guard is dropped.
    pub(crate) fn run(mut self, child: &SessionId) -> TakenRun {
        let mut state = self.limits.state();
        state.total = state.total.saturating_sub(1);
        Limits::hold(&mut state, child);
        drop(state);
        self.given = true;
        TakenRun {
            limits: self.limits.clone(),
            child: child.clone(),
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if self.given {
            return;
        }
        let mut state = self.limits.state();
        state.total = state.total.saturating_sub(1);
        self.limits.pump(&mut state);
    }
}

/// The slot of a child run for work taken from the cluster's queue; dropping it lets the
/// next call in.
pub(crate) struct TakenRun {
    limits: Arc<Limits>,
    child: SessionId,
}

impl Drop for TakenRun {
    fn drop(&mut self) {
        let mut state = self.limits.state();
        self.limits.unhold(&mut state, &self.child);
    }
}
