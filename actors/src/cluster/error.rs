//! Why joining or reading a cluster failed.

/// A failure of the cluster: its configuration, its NATS connection or a JetStream call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// A `[cluster]` key is missing or wrong. Not retryable without a config change.
    #[error("[cluster] {key}: {message}")]
    Config {
        /// The key, as in `nats` or `prefix`.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The NATS server could not be reached at start. Retryable once it runs.
    #[error("cannot connect to NATS at {url} ([cluster] nats): {message}")]
    Connect {
        /// The server's address, credentials removed.
        url: String,
        /// The client's error.
        message: String,
    },
    /// A JetStream call (a stream, a bucket, a consumer) failed. Often retryable.
    #[error("JetStream: {what}: {message}")]
    JetStream {
        /// What was being done, naming the stream or bucket.
        what: String,
        /// The server's or the client's error.
        message: String,
    },
}

impl ClusterError {
    /// A JetStream failure while doing `what`.
    pub(crate) fn jetstream(what: impl Into<String>, error: impl std::fmt::Display) -> Self {
        ClusterError::JetStream {
            what: what.into(),
            message: error.to_string(),
        }
    }
}
