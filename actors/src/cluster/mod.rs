//! The cluster: a node's link to the other nodes over NATS JetStream.
//!
//! [`Cluster::join`] connects to NATS (the connection reconnects on its own), makes sure the
//! events stream and the nodes bucket exist, and starts the event bridge: this node's events go
//! to the stream on the subject of their session tree (`outbound`), other nodes' events come
//! from it into this node's bus (`feed::inbound`). [`Cluster::start_lease`] then holds this
//! node's lease in the nodes bucket (`membership`). The SSE server reads the stream itself
//! ([`Cluster::events_after`]): its event ids are stream sequences, the same on every node.
//!
//! Only the runtime starts a cluster; this module knows nothing of the runtime.

mod asks;
mod connect;
mod error;
mod feed;
mod held_elsewhere;
mod leases;
mod membership;
mod names;
mod outbound;
mod status;
mod work;

pub(crate) use asks::{AskOutcome, AskRequest, Asks, Elsewhere, LiveNodes};
pub use error::ClusterError;
pub use feed::StreamEvent;
pub use membership::{Load, NodeInfo, NodeStatus, list_nodes};
pub use names::Names;
pub use outbound::{NODE_HEADER, Progress};
pub use status::{BridgeStatus, ConnectionStatus};
pub(crate) use work::{LostWatch, WorkQueue};

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use taskforce_agents::config::ClusterConfig;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::bus::BusHandle;
use feed::Read;
use held_elsewhere::HeldElsewhere;
use status::Counters;

/// How long a node waits before it reads or asks NATS again after a failure (the connection
/// reconnects on its own meanwhile).
const RETRY_AFTER: Duration = Duration::from_millis(500);
/// How many times a node joining asks the others for the asks they hold.
const SEED_TRIES: usize = 5;

/// What a node reports of itself for its lease, asked at each heartbeat.
pub type LoadFn = Box<dyn Fn() -> (Load, String) + Send + Sync>;

/// A node's membership of a cluster and its event bridge. Shared by the runtime's handles.
pub struct Cluster {
    config: ClusterConfig,
    names: Names,
    node: Arc<str>,
    client: async_nats::Client,
    js: jetstream::Context,
    bucket: kv::Store,
    bus: BusHandle,
    counters: Arc<Counters>,
    progress: watch::Receiver<Progress>,
    /// The stream's creation time (ms): the `<epoch>` of SSE ids in cluster mode.
    epoch: u64,
    /// The stream's last sequence when the node joined.
    joined_at: u64,
    started: u64,
    address: Mutex<Option<String>>,
    /// Stops the lease's renewal.
    heartbeat: CancellationToken,
    /// Held by each renewal while it writes: a clean leave takes it before deleting the lease,
    /// so that no renewal still in flight writes the lease back after it is gone.
    renewing: tokio::sync::Mutex<()>,
    /// Answering replies to asks held here, once started.
    asks: OnceLock<Arc<Asks>>,
    /// The asks other nodes hold, as their events tell.
    held_elsewhere: Arc<HeldElsewhere>,
    /// The work queue, once this node takes part in placing child runs.
    work: OnceLock<Arc<WorkQueue>>,
    /// Stops everything.
    stop: CancellationToken,
}

/// The cluster as one node (or `taskforce cluster status`) sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterStatus {
    /// The cluster's prefix.
    pub prefix: String,
    /// The node answering, when a node answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub this_node: Option<String>,
    /// Every node with a lease, expired ones included.
    pub nodes: Vec<NodeStatus>,
}

impl Cluster {
    /// Joins the cluster of `config` with `bus`'s events: connects, opens (or creates) the
    /// stream and the bucket, and starts the bridge. Events published on `bus` from now on go
    /// to the cluster. The lease starts with [`Cluster::start_lease`].
    pub(crate) async fn join(
        config: &ClusterConfig,
        bus: &BusHandle,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let names = Names::new(&config.prefix)?;
        let url = config.nats_url().map_err(|message| ClusterError::Config {
            key: "nats".into(),
            message,
        })?;
        let node: Arc<str> = match &config.node {
            Some(node) => Arc::from(node.as_str()),
            None => Arc::from(default_node_name()),
        };
        let counters = Arc::new(Counters::default());
        let client = connect::connect(url, &node, Some(counters.clone())).await?;
        let js = connect::context(client.clone());
        let mut stream = connect::events_stream(&js, &names, config).await?;
        let bucket = connect::nodes_bucket(&js, &names, true).await?;
        let info = stream
            .info()
            .await
            .map_err(|e| ClusterError::jetstream("reading the events stream", e))?;
        let joined_at = info.state.last_sequence;
        let epoch = u64::try_from(info.created.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        let tap = bus.tap().ok_or_else(|| ClusterError::Config {
            key: "nats".into(),
            message: "this runtime's bus is already bridged to a cluster".into(),
        })?;
        let (progress_tx, progress) = watch::channel(Progress::default());
        let stop = CancellationToken::new();
        let held_elsewhere = Arc::new(HeldElsewhere::default());
        tokio::spawn(
            outbound::Outbound {
                js: js.clone(),
                names: names.clone(),
                node: node.clone(),
                run: ulid::Ulid::new().to_string(),
                bus: bus.clone(),
                tap,
                counters: counters.clone(),
                progress: progress_tx,
                stop: stop.clone(),
            }
            .run(),
        );
        tokio::spawn(
            feed::Inbound {
                js: js.clone(),
                names: names.clone(),
                node: node.clone(),
                bus: bus.clone(),
                held: held_elsewhere.clone(),
                counters: counters.clone(),
                after: joined_at,
                stop: stop.clone(),
            }
            .run(),
        );
        tracing::info!(
            "node {node} joined cluster {} (stream {} at {joined_at})",
            names.prefix(),
            names.events_stream()
        );
        Ok(Arc::new(Cluster {
            config: config.clone(),
            names,
            node,
            client,
            js,
            bucket,
            bus: bus.clone(),
            counters,
            progress,
            epoch,
            joined_at,
            started: taskforce_agents::id::now_ms(),
            address: Mutex::new(None),
            heartbeat: stop.child_token(),
            renewing: tokio::sync::Mutex::new(()),
            asks: OnceLock::new(),
            held_elsewhere,
            work: OnceLock::new(),
            stop,
        }))
    }

    /// Starts holding this node's lease: written now and renewed every heartbeat with what
    /// `load` reports, until [`Cluster::leave`] (or [`Cluster::stop_heartbeat`]). When a
    /// renewal comes after the lease had lapsed (the node was cut off, or stalled, for longer
    /// than its lease), the other nodes have taken it for dead meanwhile: `taken_for_dead` is
    /// called, once per lapse.
    pub(crate) fn start_lease(
        self: &Arc<Self>,
        load: LoadFn,
        taken_for_dead: impl Fn() + Send + 'static,
    ) {
        let cluster = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(cluster.config.heartbeat);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut renewed: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    () = cluster.heartbeat.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let _renewing = cluster.renewing.lock().await;
                if cluster.heartbeat.is_cancelled() {
                    return;
                }
                let info = cluster.info(&load);
                match membership::renew(&cluster.bucket, &info).await {
                    Ok(()) => {
                        let now = tokio::time::Instant::now();
                        if renewed.is_some_and(|at| now - at > cluster.config.lease) {
                            tracing::warn!(
                                "this node's lease lapsed before it could renew it: the other nodes took it for dead"
                            );
                            taken_for_dead();
                        }
                        renewed = Some(now);
                    }
                    Err(e) => tracing::warn!("{e}"),
                }
            }
        });
    }

    /// A watch that resolves once a given node is gone (its lease lapsed or was deleted).
    pub(crate) fn lost_watch(&self) -> LostWatch {
        let bucket = self.bucket.clone();
        let patience = self.config.lease;
        Arc::new(move |node| Box::pin(leases::lost(bucket.clone(), node, patience)))
    }

    /// Calls `on_lost` for each other node whose lease lapses, until this node leaves. The
    /// asks the lost node left open are closed for every client first (by one survivor).
    pub(crate) fn on_departures(&self, on_lost: impl Fn(String) + Send + 'static) {
        let (bucket, me, patience) = (
            self.bucket.clone(),
            self.node.to_string(),
            self.config.lease,
        );
        let (held, bus) = (self.held_elsewhere.clone(), self.bus.clone());
        let (nodes, closer) = (self.bucket.clone(), me.clone());
        let on_lost = move |node: String| {
            let closing = held.forget(&node);
            if !closing.is_empty() {
                let (nodes, closer, bus) = (nodes.clone(), closer.clone(), bus.clone());
                let lost = node.clone();
                tokio::spawn(async move {
                    if first_live(&nodes, &closer, &lost).await {
                        bus.publish_all(closing);
                    }
                });
            }
            on_lost(node);
        };
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = leases::departures(bucket, me, patience, on_lost) => {}
            }
        });
    }

    /// The nodes holding a live lease now, as far as this node can read.
    pub(crate) fn live_nodes(&self) -> LiveNodes {
        let bucket = self.bucket.clone();
        Arc::new(move || {
            let bucket = bucket.clone();
            Box::pin(async move {
                let nodes = list_nodes(&bucket).await.ok()?;
                Some(
                    nodes
                        .into_iter()
                        .filter(|n| !n.expired)
                        .map(|n| n.info.node)
                        .collect(),
                )
            })
        })
    }

    /// Keeps the asks' side of this node for as long as it is in the cluster, and learns
    /// which asks the other nodes hold already.
    pub(crate) fn keep_asks(&self, asks: Arc<Asks>) {
        let held = self.held_elsewhere.clone();
        let seeding = asks.clone();
        let stop = self.stop.clone();
        tokio::spawn(async move {
            // Asked again (a few times) while some live node does not answer in time.
            for _ in 0..SEED_TRIES {
                let found = seeding.elsewhere().await;
                for (node, request) in &found.permissions {
                    held.seed(node, std::slice::from_ref(request), &[]);
                }
                for (node, request) in &found.questions {
                    held.seed(node, &[], std::slice::from_ref(request));
                }
                if found.complete {
                    return;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RETRY_AFTER) => {}
                }
            }
        });
        let _ = self.asks.set(asks);
    }

    /// The asks the other live nodes hold (none when this node takes no part in asks).
    pub(crate) async fn asks_elsewhere(&self) -> Elsewhere {
        match self.asks.get() {
            Some(asks) => asks.elsewhere().await,
            None => Elsewhere::default(),
        }
    }

    /// Keeps the work queue's side of this node for as long as it is in the cluster.
    pub(crate) fn keep_work(&self, work: Arc<WorkQueue>) {
        let _ = self.work.set(work);
    }

    /// Sends `reply` to the node that holds its ask; `Unknown` when none does (or this node
    /// takes no part in asks).
    pub(crate) async fn forward_reply(&self, reply: &AskRequest) -> AskOutcome {
        match self.asks.get() {
            Some(asks) => asks.forward(reply).await,
            None => AskOutcome::Unknown,
        }
    }

    /// Tells every node to cancel `session`'s tree where it runs.
    pub(crate) async fn cancel_everywhere(&self, session: &taskforce_agents::id::SessionId) {
        work::send_cancel(&self.client, &self.names, session).await;
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The cluster's names.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The NATS client, for requests between nodes (see [`Names::node_subject`]).
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Records the address of this node's HTTP server, shown in its lease.
    pub fn set_address(&self, address: String) {
        *self.address.lock().unwrap_or_else(PoisonError::into_inner) = Some(address);
    }

    /// The stream's creation time in ms: the `<epoch>` of SSE ids in cluster mode, the same
    /// on every node (a stream deleted and made again gets another).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The stream's last sequence when this node joined.
    pub fn joined_at(&self) -> u64 {
        self.joined_at
    }

    /// The NATS connection as this node sees it.
    pub fn connection(&self) -> ConnectionStatus {
        self.counters.connection()
    }

    /// What the event bridge has done.
    pub fn bridge(&self) -> BridgeStatus {
        self.counters.bridge()
    }

    /// Every node with a lease, this one included, and this node's own name.
    pub async fn status(&self) -> Result<ClusterStatus, ClusterError> {
        Ok(ClusterStatus {
            prefix: self.names.prefix().to_string(),
            this_node: Some(self.node.to_string()),
            nodes: list_nodes(&self.bucket).await?,
        })
    }

    /// The stream's events after sequence `after`, in order, for as long as they are read:
    /// every node's, this one's included. A sequence no longer kept is skipped (the first
    /// event then has a larger sequence than `after + 1`).
    pub fn events_after(
        &self,
        after: u64,
    ) -> BoxStream<'static, Result<StreamEvent, ClusterError>> {
        feed::events_after(self.js.clone(), &self.names, after)
            .filter_map(|read| async move {
                match read {
                    Ok(Read::Event(event)) => Some(Ok(event)),
                    Ok(Read::Unreadable(_)) => None,
                    Err(e) => Some(Err(e)),
                }
            })
            .boxed()
    }

    /// Waits (up to `limit`) until every event this node published so far is stored in the
    /// stream, and answers the stream sequence of the newest of them (0: none yet); `None`
    /// when the limit passed first.
    pub async fn published(&self, limit: Duration) -> Option<u64> {
        let target = self.bus.last_tapped();
        let mut progress = self.progress.clone();
        let reached = tokio::time::timeout(limit, progress.wait_for(|p| p.done >= target)).await;
        match reached {
            Ok(Ok(p)) => Some(p.stream),
            _ => None,
        }
    }

    /// Resolves once this node has left the cluster (or its runtime went away).
    pub async fn left(&self) {
        self.stop.cancelled().await;
    }

    /// Stops renewing this node's lease, as a node that hangs would: other nodes see it expire.
    pub fn stop_heartbeat(&self) {
        self.heartbeat.cancel();
    }

    /// Leaves the cluster cleanly: waits up to `within` for this node's events to be stored,
    /// deletes its lease, and stops the bridge.
    pub async fn leave(&self, within: Duration) {
        if self.published(within).await.is_none() {
            let pending = self.bridge().pending;
            tracing::warn!("leaving the cluster with {pending} events of this node not stored");
        }
        self.heartbeat.cancel();
        // A renewal already writing ends first: written after the deletion, it would bring the
        // lease back as a node that never renews it again.
        let _renewing = self.renewing.lock().await;
        if let Some(asks) = self.asks.get() {
            asks.stop();
        }
        if let Some(work) = self.work.get() {
            work.stop();
        }
        if let Err(e) = membership::release(&self.bucket, &self.node).await {
            tracing::warn!("{e}");
        }
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.client.flush()).await;
    }

    /// This node's lease as it is now.
    fn info(&self, load: &LoadFn) -> NodeInfo {
        let (load, store) = load();
        NodeInfo {
            node: self.node.to_string(),
            address: self
                .address
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            started: self.started,
            renewed: taskforce_agents::id::now_ms(),
            lease_ms: millis(self.config.lease),
            heartbeat_ms: millis(self.config.heartbeat),
            version: env!("CARGO_PKG_VERSION").into(),
            load,
            nats: self.counters.connection(),
            store,
            bridge: self.counters.bridge(),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Reads the cluster of `config` from outside (no node of its own): every node with a lease.
/// For `taskforce cluster status`.
pub async fn read_status(config: &ClusterConfig) -> Result<ClusterStatus, ClusterError> {
    let names = Names::new(&config.prefix)?;
    let url = config.nats_url().map_err(|message| ClusterError::Config {
        key: "nats".into(),
        message,
    })?;
    let client = connect::connect(url, "taskforce-cluster-status", None).await?;
    let js = connect::context(client);
    let nodes = match connect::nodes_bucket(&js, &names, false).await {
        Ok(bucket) => list_nodes(&bucket).await?,
        // No node ever joined this cluster.
        Err(_) => Vec::new(),
    };
    Ok(ClusterStatus {
        prefix: names.prefix().to_string(),
        this_node: None,
        nodes,
    })
}

/// Whether `me` comes first by name among the nodes with a live lease, `lost` left out (so that
/// one survivor alone acts for all; when the leases cannot be read, every node does). The lost
/// node is named: its lease, read a moment after it was found lapsed, may still look live.
async fn first_live(bucket: &kv::Store, me: &str, lost: &str) -> bool {
    match list_nodes(bucket).await {
        Ok(nodes) => !nodes
            .iter()
            .any(|n| !n.expired && n.info.node != lost && n.info.node.as_str() < me),
        Err(_) => true,
    }
}

/// A node name unique to this start: the host name and a fresh ULID.
fn default_node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "node".into());
    let host: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    let host = if host.is_empty() { "node".into() } else { host };
    format!("{host}-{}", ulid::Ulid::new())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_default_node_name_is_fresh_and_usable_as_a_nats_name() {
        let a = super::default_node_name();
        let b = super::default_node_name();
        assert_ne!(a, b);
        taskforce_agents::config::check_cluster_name(&a).unwrap();
    }
}
