//! Concurrent maps keyed by session id.

use dashmap::DashMap;
use taskforce_agents::id::SessionId;

/// A concurrent map keyed by session id, hashed with a fast seeded hasher (these maps are
/// touched on every event and status change).
pub(crate) type IdMap<V> = DashMap<SessionId, V, foldhash::fast::RandomState>;
