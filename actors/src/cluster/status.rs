//! What a node knows of its own link to the cluster: the NATS connection's state and history,
//! and the event bridge's counts. Shown in its lease and in `GET /cluster/status`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// The NATS connection as a node sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectionStatus {
    /// Whether the connection is up now.
    pub connected: bool,
    /// How often it was lost since the node started.
    pub disconnects: u64,
    /// When it was last lost (epoch ms), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_disconnected: Option<u64>,
    /// When it last came back (epoch ms), if it was ever lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconnected: Option<u64>,
}

/// What the event bridge has done since the node started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BridgeStatus {
    /// This node's events stored in the stream.
    pub published: u64,
    /// This node's events waiting to be stored (buffered while NATS is away).
    pub pending: u64,
    /// Publishes that failed (each was tried again, unless counted in `missed`).
    pub failed: u64,
    /// This node's events never stored: the buffer was full while NATS was away.
    pub missed: u64,
    /// Other nodes' events fed into this node's bus.
    pub received: u64,
    /// Messages of the stream that could not be read as events.
    pub unreadable: u64,
}

/// The live counters behind [`ConnectionStatus`] and [`BridgeStatus`].
#[derive(Debug)]
pub(crate) struct Counters {
    connected: AtomicBool,
    disconnects: AtomicU64,
    last_disconnected: AtomicU64,
    last_reconnected: AtomicU64,
    pub(crate) published: AtomicU64,
    pub(crate) pending: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) missed: AtomicU64,
    pub(crate) received: AtomicU64,
    pub(crate) unreadable: AtomicU64,
    /// Whether the connection is up, for tasks that wait for it to come back.
    up: watch::Sender<bool>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            connected: AtomicBool::new(true),
            disconnects: AtomicU64::new(0),
            last_disconnected: AtomicU64::new(0),
            last_reconnected: AtomicU64::new(0),
            published: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            received: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
            up: watch::Sender::new(true),
        }
    }
}

impl Counters {
    /// The connection was lost.
    pub(crate) fn disconnected(&self) {
        if self.connected.swap(false, Ordering::AcqRel) {
            self.disconnects.fetch_add(1, Ordering::Relaxed);
            self.last_disconnected
                .store(taskforce_agents::id::now_ms(), Ordering::Relaxed);
        }
        self.up.send_replace(false);
    }

    /// The connection is up (again).
    pub(crate) fn connected(&self) {
        if !self.connected.swap(true, Ordering::AcqRel) {
            self.last_reconnected
                .store(taskforce_agents::id::now_ms(), Ordering::Relaxed);
        }
        self.up.send_replace(true);
    }

    /// A receiver that says whether the connection is up, and changes when that changes.
    pub(crate) fn up(&self) -> watch::Receiver<bool> {
        self.up.subscribe()
    }

    /// The connection's state now.
    pub(crate) fn connection(&self) -> ConnectionStatus {
        let when = |a: &AtomicU64| Some(a.load(Ordering::Relaxed)).filter(|ms| *ms > 0);
        ConnectionStatus {
            connected: self.connected.load(Ordering::Acquire),
            disconnects: self.disconnects.load(Ordering::Relaxed),
            last_disconnected: when(&self.last_disconnected),
            last_reconnected: when(&self.last_reconnected),
        }
    }

    /// The bridge's counts now.
    pub(crate) fn bridge(&self) -> BridgeStatus {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BridgeStatus {
            published: get(&self.published),
            pending: get(&self.pending),
            failed: get(&self.failed),
            missed: get(&self.missed),
            received: get(&self.received),
            unreadable: get(&self.unreadable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_connection_is_counted_once_and_its_return_is_dated() {
        let counters = Counters::default();
        assert!(counters.connection().connected);
        counters.disconnected();
        counters.disconnected();
        let lost = counters.connection();
        assert!(!lost.connected);
        assert_eq!(lost.disconnects, 1);
        assert!(lost.last_disconnected.is_some() && lost.last_reconnected.is_none());
        assert!(!*counters.up().borrow());
        counters.connected();
        let back = counters.connection();
        assert!(back.connected && back.last_reconnected.is_some());
        assert_eq!(back.disconnects, 1);
    }
}
