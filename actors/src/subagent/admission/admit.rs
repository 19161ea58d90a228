//! Admitting one task call: counting a new child in its tree, then waiting for a running slot.

use std::sync::Arc;

use serde_json::{Map, Value};
use taskforce_agents::id::SessionId;
use taskforce_agents::tool::{ToolContext, ToolError};

use super::LimitError;
use super::{Reservation, Slot};
use crate::store::{Store, TreeCount};
use crate::subagent::Subagents;
use crate::subagent::clock::Activity;

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
    /// The child may run on another node of the cluster when this one is full.
    pub roams: bool,
}

/// Admits a task `call` that starts a new child or resumes one: counts a new child in its tree
/// (failing at once when the tree is full), then waits for a running slot, showing
/// `queued: true` on the call's part meanwhile (the caller is not idle while it waits).
/// Cancelling `ctx.abort` while waiting leaves the queue with `ToolError::Aborted`.
pub(crate) async fn admit(
    subagents: &Subagents,
    ctx: &ToolContext,
    call: Call<'_>,
) -> Result<Admission, ToolError> {
    let limits = &subagents.limits;
    let reservation = reserve(subagents, call.root, call.new).await?;
    let waiting = if call.roams {
        limits.enqueue_anywhere(call.parent, call.child)
    } else {
        limits.enqueue(call.parent, call.child)
    };
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
    subagents: &Subagents,
    root: &SessionId,
    new: bool,
) -> Result<Option<Reservation>, ToolError> {
    if !new {
        return Ok(None);
    }
    let limits = &subagents.limits;
    // Nodes of a cluster count a tree's children in the store they share: its calls may be
    // made on several nodes.
    if subagents.in_cluster() && counted_in_store(subagents, root).await? {
        return Ok(Some(
            limits.shared_reservation(root, subagents.core.store.clone()),
        ));
    }
    if !limits.knows_tree(root) {
        limits
            .seeding(root)
            .get_or_init(|| async {
                // A call that came just after the count started finds it here.
                if !limits.knows_tree(root) {
                    limits.seed_tree(root, stored_descendants(&*subagents.core.store, root).await);
                }
            })
            .await;
    }
    Ok(Some(limits.reserve(root)?))
}

/// Counts a new child of `root`'s tree in the shared store; `false` when the store keeps no
/// count (the runtime counts in memory).
async fn counted_in_store(subagents: &Subagents, root: &SessionId) -> Result<bool, ToolError> {
    let store = &subagents.core.store;
    let limit = subagents.limits.per_tree();
    let mut seed = None;
    for _ in 0..2 {
        match store.count_tree_child(root, seed, limit).await {
            Ok(TreeCount::Counted) => return Ok(true),
            Ok(TreeCount::Full { created }) => {
                return Err(LimitError::TreeFull { created, limit }.into());
            }
            Ok(TreeCount::Unseeded) => seed = Some(stored_descendants(&**store, root).await),
            Ok(TreeCount::NotKept) => return Ok(false),
            Err(e) => {
                return Err(ToolError::Failed(format!(
                    "cannot count the children of session tree {root}: {e}"
                )));
            }
        }
    }
    Ok(false)
}

fn queued(on: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("queued".into(), Value::Bool(on));
    m
}

/// How many descendants of `root` the store holds.
async fn stored_descendants(store: &dyn Store, root: &SessionId) -> usize {
    let mut count = 0;
    let mut stack = vec![root.clone()];
    while let Some(id) = stack.pop() {
        match store.children(&id).await {
            Ok(kids) => {
                count += kids.len();
                stack.extend(kids.into_iter().map(|k| k.id));
            }
            Err(e) => tracing::warn!(session = %id, "counting a tree's children failed: {e}"),
        }
    }
    count
}
