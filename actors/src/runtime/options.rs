//! How to start a runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use taskforce_agents::config::LoadedConfig;
use taskforce_agents::skill::Skills;

/// How to start a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// The loaded configuration (its paths name the data directory and the project).
    pub loaded: LoadedConfig,
    /// The environment providers and the search backend read API keys from.
    pub env: BTreeMap<String, String>,
    /// How long an idle session actor stays in memory.
    pub idle_stop: Duration,
    /// Arbiter threads for session actors (0: one per core).
    pub arbiters: usize,
    /// Pin each arbiter thread to its own core when there is one arbiter per core the process
    /// may use (off by default). Unpinned, the kernel may run two arbiters on one core for a
    /// few milliseconds after one wakes the other; pinned, a burst local to the arbiters (a
    /// cancelled tree) ends sooner, but on a small machine the threads the sessions wait on (the
    /// store's writer, blocking file reads) can no longer be moved out of the arbiters' way.
    pub pin_arbiters: bool,
    /// Events kept for subscribers; one that falls further behind is told it lagged.
    pub bus_capacity: usize,
    /// The first wait before retrying a failed model call; it doubles up to 30 s.
    pub retry_base: Duration,
    /// At start, deliver the background results earlier runtimes left undelivered (recording
    /// children a dead runtime left running as interrupted); a delivery may start a parent turn.
    /// Off for short-lived tools that only read or manage sessions.
    pub deliver_background: bool,
    /// The skills, when the caller already found them (so that their warnings are logged
    /// once); `None` looks for them in the configuration's folders.
    pub skills: Option<Skills>,
    /// Start the configured MCP servers (in the background). Off for short-lived tools that
    /// only read or manage sessions.
    pub mcp: bool,
    /// Join the cluster of the configuration's `[cluster]` (off by default): this runtime's
    /// events go to the cluster's NATS JetStream stream, other nodes' come into its bus, and
    /// it holds a lease in the cluster's nodes bucket.
    pub cluster: bool,
}

impl RuntimeOptions {
    /// Defaults for `loaded`, reading keys from this process's environment.
    pub fn new(loaded: LoadedConfig) -> Self {
        RuntimeOptions {
            loaded,
            env: std::env::vars().collect(),
            idle_stop: Duration::from_secs(300),
            arbiters: 0,
            pin_arbiters: false,
            bus_capacity: 4096,
            retry_base: Duration::from_secs(2),
            deliver_background: true,
            skills: None,
            mcp: true,
            cluster: false,
        }
    }
}
