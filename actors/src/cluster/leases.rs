//! Telling when a node is gone: its lease lapsed (not renewed within its length). A deleted
//! lease is a clean stop. A lapse is confirmed by reading the lease again before it counts, so
//! a node cut off from NATS itself does not take every other node for dead.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv;
use futures::StreamExt;
use tokio::time::Instant;

use super::membership::NodeInfo;

/// When the lease in `entry` lapses (`None`: it is not a lease, or it was deleted).
fn lapses_at(entry: &kv::Entry) -> Option<Instant> {
    if entry.operation != kv::Operation::Put {
        return None;
    }
    let info: NodeInfo = serde_json::from_slice(&entry.value).ok()?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let written = u128::try_from(entry.created.unix_timestamp_nanos()).unwrap_or(0);
    let age = Duration::from_nanos(u64::try_from(now.saturating_sub(written)).unwrap_or(0));
    let left = Duration::from_millis(info.lease_ms).saturating_sub(age);
    Some(Instant::now() + left)
}

/// Whether `node`'s lease, read again now, has lapsed or is gone; `None` when it cannot be read
/// (this node is cut off: it cannot tell).
async fn confirmed_gone(bucket: &kv::Store, node: &str) -> Option<bool> {
    match bucket.entry(node).await {
        Ok(None) => Some(true),
        Ok(Some(entry)) => Some(lapses_at(&entry).is_none_or(|at| at <= Instant::now())),
        Err(_) => None,
    }
}

/// Resolves once `node` is gone: its lease lapsed or was deleted (or never shows up within
/// `patience`).
pub(crate) async fn lost(bucket: kv::Store, node: String, patience: Duration) {
    let mut watch = match bucket.watch_with_history(node.as_str()).await {
        Ok(watch) => Some(watch),
        Err(e) => {
            tracing::warn!(node, "cannot watch the lease of a node: {e}");
            None
        }
    };
    let mut deadline = Instant::now() + patience;
    loop {
        let next = async {
            match &mut watch {
                Some(w) => w.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            entry = next => match entry {
                Some(Ok(entry)) => match lapses_at(&entry) {
                    Some(at) => deadline = at,
                    None => return,
                },
                Some(Err(e)) => tracing::warn!(node, "watching the lease of a node: {e}"),
                None => watch = None,
            },
            () = tokio::time::sleep_until(deadline) => match confirmed_gone(&bucket, &node).await {
                Some(true) => return,
                // Renewed meanwhile (the watch brings the new entry), or not readable now:
                // look again a lease later at the latest.
                Some(false) | None => deadline = Instant::now() + patience,
            },
        }
    }
}

/// Calls `on_lost` once for each node (other than `me`) whose lease lapses, for as long as it
/// runs. A node that stops cleanly (deletes its lease) is not lost.
pub(crate) async fn departures(
    bucket: kv::Store,
    me: String,
    patience: Duration,
    on_lost: impl Fn(String) + Send,
) {
    let mut watch = match bucket.watch_with_history(">").await {
        Ok(watch) => watch,
        Err(e) => {
            tracing::warn!("cannot watch the nodes' leases: {e}");
            return;
        }
    };
    let mut deadlines: HashMap<String, Instant> = HashMap::new();
    loop {
        let first = deadlines
            .iter()
            .min_by_key(|(_, at)| **at)
            .map(|(node, at)| (node.clone(), *at));
        let due = async {
            match &first {
                Some((_, at)) => tokio::time::sleep_until(*at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            entry = watch.next() => match entry {
                Some(Ok(entry)) if entry.key != me => match lapses_at(&entry) {
                    Some(at) => {
                        deadlines.insert(entry.key, at);
                    }
                    None => {
                        deadlines.remove(&entry.key);
                    }
                },
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::warn!("watching the nodes' leases: {e}"),
                None => return,
            },
            () = due => {
                let Some((node, _)) = first else { continue };
                match confirmed_gone(&bucket, &node).await {
                    Some(true) => {
                        deadlines.remove(&node);
                        tracing::warn!(node, "the lease of node {node} lapsed: it is taken for dead");
                        on_lost(node);
                    }
                    Some(false) | None => {
                        deadlines.insert(node, Instant::now() + patience);
                    }
                }
            }
        }
    }
}
