//! Joining a cluster: what a node takes part in (asks held here for other nodes' clients,
//! placing and taking child runs, cancels from any node, repairing what a lost node left) and
//! what it reports of itself in its lease.

use std::sync::Arc;

use actix::Addr;
use taskforce_agents::permission::PermissionReply;

use crate::RuntimeError;
use crate::cluster::{Asks, Cluster, WorkQueue};
use crate::core::Core;
use crate::subagent::Subagents;
use crate::supervisor::{CancelTree, Supervisor};

/// Takes part in the cluster's work: answers asks held here for other nodes' clients, repairs
/// what nodes that die leave, and, when the store is shared, places child runs on other nodes
/// when this one is full and runs theirs.
pub(super) async fn join_cluster(
    cluster: &Arc<Cluster>,
    core: &Arc<Core>,
    subagents: &Arc<Subagents>,
    supervisor: &Addr<Supervisor>,
) -> Result<(), RuntimeError> {
    let asks = Asks::start(
        cluster.client().clone(),
        cluster.names(),
        Arc::from(cluster.node()),
        core.broker.clone(),
        core.questions.clone(),
        cluster.live_nodes(),
    )
    .await?;
    cluster.keep_asks(asks);
    // Cancels from other nodes always reach this one; child runs move between nodes only
    // through a shared store.
    let shared = core.store.is_shared();
    let supervisor = supervisor.clone();
    let queue = WorkQueue::start(
        cluster.client().clone(),
        cluster.names(),
        cluster.node(),
        subagents.clone(),
        cluster.lost_watch(),
        Box::new(move |id| supervisor.do_send(CancelTree { id: id.clone() })),
        shared,
    )
    .await?;
    if shared {
        subagents.join_cluster(cluster.node(), queue.clone());
    }
    cluster.keep_work(queue);
    // What a node that dies leaves is taken over by one of the others (the store's claims
    // make sure only one repairs each run and delivers each result).
    let (core, subagents) = (Arc::downgrade(core), Arc::downgrade(subagents));
    cluster.on_departures(move |node| {
        let (Some(core), Some(subagents)) = (core.upgrade(), subagents.upgrade()) else {
            return;
        };
        tokio::spawn(async move {
            let repaired = crate::session::repair_dead_runs(&core, None).await;
            tracing::info!(
                node,
                repaired = repaired.len(),
                "took over what a lost node left"
            );
            subagents.deliver_pending(None).await;
        });
    });
    Ok(())
}

/// What a node does when it learns that the others took it for dead (its lease lapsed while
/// it was cut off): they have closed the asks it holds for every client, so it dismisses them
/// too (permission asks rejected, questions dismissed) instead of waiting for replies that
/// no client can send.
pub(super) fn close_asks_when_taken_for_dead(core: &Arc<Core>) -> impl Fn() + Send + 'static {
    let core = Arc::downgrade(core);
    move || {
        let Some(core) = core.upgrade() else { return };
        tokio::spawn(async move {
            for ask in core.broker.list() {
                core.broker
                    .reply(&ask.id, PermissionReply::Reject, None)
                    .await;
            }
            for question in core.questions.list() {
                core.questions.reject(&question.id);
            }
        });
    }
}

/// What this node reports in its cluster lease: its running sessions, its running-child slots
/// and its store.
pub(super) fn cluster_load(core: &Arc<Core>, subagents: &Arc<Subagents>) -> crate::cluster::LoadFn {
    let (core, subagents) = (Arc::downgrade(core), Arc::downgrade(subagents));
    Box::new(move || {
        let mut load = crate::cluster::Load::default();
        let mut store = "ok".to_string();
        if let (Some(core), Some(subagents)) = (core.upgrade(), subagents.upgrade()) {
            let (used, capacity) = subagents.slots();
            load.running_sessions = core.statuses.len() as u64;
            load.slots_used = used as u64;
            load.slots_capacity = capacity as u64;
            load.slots_free = capacity.saturating_sub(used) as u64;
            if let Some(link) = core.store.link() {
                store = link;
            }
        }
        (load, store)
    })
}
