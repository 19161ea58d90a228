//! The server of a cluster node: its event log follows the cluster's stream, so that every
//! node's SSE clients see every node's events under the same ids (`<stream epoch>-<stream
//! sequence>`), and a client that reconnects to any node resumes where it left off: from the
//! ring when it holds the events after the client's id, else from the stream itself.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use taskforce_actors::cluster::{Cluster, ClusterError, StreamEvent};

use super::events::EventLog;
use super::ring::Ring;

/// How long the follower waits before reading the stream again after a failure.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// An event log fed by `cluster`'s stream from the point the node joined it.
pub(crate) fn follow(cluster: Arc<Cluster>, directory: String, max_bytes: usize) -> EventLog {
    let start = cluster.joined_at();
    let ring = Ring::starting_after(max_bytes, start);
    let log = EventLog::with_ring(directory, ring, cluster.epoch(), Some(cluster.clone()));
    let follower = log.clone();
    tokio::spawn(async move {
        let mut after = start;
        loop {
            let mut events = cluster.events_after(after);
            loop {
                let next = tokio::select! {
                    () = cluster.left() => return,
                    next = events.next() => next,
                };
                let Some(next) = next else { break };
                match next {
                    Ok(event) => {
                        after = event.seq;
                        follower.push_stream(&event);
                    }
                    Err(e) => {
                        tracing::warn!("the event log stopped reading the cluster's stream: {e}");
                        break;
                    }
                }
            }
            // The log is gone when nobody holds it but this task: stop with it.
            if follower.is_only_holder() {
                return;
            }
            tokio::time::sleep(RETRY_AFTER).await;
        }
    });
    log
}

/// The events of `cluster`'s stream after `after`, for a client whose events the ring does
/// not hold.
pub(crate) fn replay(
    cluster: &Cluster,
    after: u64,
) -> BoxStream<'static, Result<StreamEvent, ClusterError>> {
    cluster.events_after(after)
}
