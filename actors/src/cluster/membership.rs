//! Membership: each node holds a lease in the `PREFIX_NODES` bucket (key: its name; value:
//! [`NodeInfo`] as JSON), renewed every heartbeat and deleted when it stops cleanly. A node
//! whose lease was not renewed within its `lease` counts as expired (dead); NATS removes its
//! key an hour later.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::ClusterError;
use super::status::{BridgeStatus, ConnectionStatus};

/// What a node says of itself in its lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeInfo {
    /// The node's name.
    pub node: String,
    /// The address of its HTTP server, when it serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// When it started (epoch ms).
    pub started: u64,
    /// When it last renewed its lease (epoch ms, its own clock).
    pub renewed: u64,
    /// How long its lease lasts without renewal (ms).
    pub lease_ms: u64,
    /// How often it renews it (ms).
    pub heartbeat_ms: u64,
    /// The taskforce version it runs.
    pub version: String,
    /// Its load.
    pub load: Load,
    /// Its NATS connection.
    pub nats: ConnectionStatus,
    /// Its store, as it reports it.
    pub store: String,
    /// Its event bridge.
    pub bridge: BridgeStatus,
}

/// How busy a node is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Load {
    /// Sessions running a loop (busy or retrying).
    pub running_sessions: u64,
    /// Running-child slots in use (of `[subagent] max_total`).
    pub slots_used: u64,
    /// Running-child slots in all (`[subagent] max_total`).
    pub slots_capacity: u64,
    /// Running-child slots free.
    pub slots_free: u64,
}

/// A node as the bucket shows it now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeStatus {
    /// What the node said when it last renewed its lease.
    #[serde(flatten)]
    pub info: NodeInfo,
    /// How long ago the lease was last renewed (ms, by the NATS server's clock).
    pub lease_age_ms: u64,
    /// The lease was not renewed within its length: the node is dead or cut off.
    pub expired: bool,
}

impl NodeStatus {
    /// The status of a node whose lease `info` was written `age` ago.
    pub fn new(info: NodeInfo, age: Duration) -> Self {
        let lease_age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
        NodeStatus {
            expired: lease_age_ms > info.lease_ms,
            info,
            lease_age_ms,
        }
    }
}

/// How long reading every lease may take: a NATS server that stops answering must not leave
/// the reader waiting.
const LIST_WITHIN: Duration = Duration::from_secs(5);

/// Every node with a lease in `bucket` (expired ones included, marked), by name.
pub async fn list_nodes(bucket: &kv::Store) -> Result<Vec<NodeStatus>, ClusterError> {
    match tokio::time::timeout(LIST_WITHIN, read_nodes(bucket)).await {
        Ok(nodes) => nodes,
        Err(_) => Err(ClusterError::jetstream(
            format!("listing bucket {}", bucket.name),
            format!("no answer within {LIST_WITHIN:?}"),
        )),
    }
}

/// [`list_nodes`] without its time limit.
async fn read_nodes(bucket: &kv::Store) -> Result<Vec<NodeStatus>, ClusterError> {
    let name = bucket.name.clone();
    // The keys as the bucket's stream counts them now (deleted ones too, skipped below): a
    // bounded answer, where following the bucket (as its key listing does) may not catch up
    // while leases are renewed faster than it reads.
    let subjects: Vec<(String, usize)> = bucket
        .stream
        .info_with_subjects(format!("{}>", bucket.prefix))
        .await
        .map_err(|e| ClusterError::jetstream(format!("listing bucket {name}"), e))?
        .try_collect()
        .await
        .map_err(|e| ClusterError::jetstream(format!("listing bucket {name}"), e))?;
    let keys: Vec<String> = subjects
        .into_iter()
        .filter_map(|(subject, _)| subject.strip_prefix(&bucket.prefix).map(str::to_string))
        .collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let mut nodes = Vec::with_capacity(keys.len());
    for key in keys {
        let entry = bucket
            .entry(key.as_str())
            .await
            .map_err(|e| ClusterError::jetstream(format!("reading {key} in bucket {name}"), e))?;
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            continue;
        };
        let info: NodeInfo = match serde_json::from_slice(&entry.value) {
            Ok(info) => info,
            Err(e) => {
                tracing::warn!("lease {key} in bucket {name} is not a node's: {e}");
                continue;
            }
        };
        let written = u128::try_from(entry.created.unix_timestamp_nanos()).unwrap_or(0);
        let age = Duration::from_nanos(u64::try_from(now.saturating_sub(written)).unwrap_or(0));
        nodes.push(NodeStatus::new(info, age));
    }
    nodes.sort_by(|a, b| a.info.node.cmp(&b.info.node));
    Ok(nodes)
}

/// Writes (or renews) `info` as its node's lease.
pub(crate) async fn renew(bucket: &kv::Store, info: &NodeInfo) -> Result<(), ClusterError> {
    let value =
        serde_json::to_vec(info).map_err(|e| ClusterError::jetstream("writing a lease", e))?;
    bucket
        .put(info.node.as_str(), value.into())
        .await
        .map_err(|e| ClusterError::jetstream(format!("renewing the lease of {}", info.node), e))?;
    Ok(())
}

/// Removes `node`'s lease (a clean stop).
pub(crate) async fn release(bucket: &kv::Store, node: &str) -> Result<(), ClusterError> {
    bucket
        .delete(node)
        .await
        .map_err(|e| ClusterError::jetstream(format!("deleting the lease of {node}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(lease_ms: u64) -> NodeInfo {
        NodeInfo {
            node: "n1".into(),
            address: None,
            started: 1,
            renewed: 2,
            lease_ms,
            heartbeat_ms: 100,
            version: "0".into(),
            load: Load::default(),
            nats: ConnectionStatus::default(),
            store: "sqlite".into(),
            bridge: BridgeStatus::default(),
        }
    }

    #[test]
    fn a_lease_older_than_its_length_is_expired() {
        assert!(!NodeStatus::new(info(1000), Duration::from_millis(999)).expired);
        let old = NodeStatus::new(info(1000), Duration::from_millis(1001));
        assert!(old.expired);
        let json = serde_json::to_value(&old).unwrap();
        assert_eq!(json["node"], "n1");
        assert_eq!(json["expired"], true);
        assert_eq!(json["lease_age_ms"], 1001);
    }
}
