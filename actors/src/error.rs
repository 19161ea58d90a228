//! Errors of the runtime's public operations.

use taskforce_agents::agent::AgentError;
use taskforce_agents::provider::ProviderError;

use crate::store::StoreError;

/// Why a runtime operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    /// No session has that id. Not retryable.
    #[error("session not found: {0}")]
    SessionNotFound(String),
    /// The id is not a session id. Not retryable.
    #[error(transparent)]
    InvalidId(#[from] taskforce_agents::id::IdError),
    /// The agent does not exist. Not retryable.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// No command has that name. Not retryable.
    #[error(transparent)]
    UnknownCommand(#[from] taskforce_agents::command::UnknownCommand),
    /// The model or provider is not usable. Not retryable without a config change.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Joining the cluster failed (its configuration, NATS, JetStream).
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    /// The session's loop was cancelled before it answered.
    #[error("the session was cancelled")]
    Cancelled,
    /// The session's actor stopped unexpectedly (a panic or a stopped arbiter).
    #[error("session {0} stopped unexpectedly")]
    Crashed(String),
    /// The runtime is shutting down.
    #[error("the runtime has stopped")]
    Stopped,
    /// The session is running a loop and cannot take work that needs it to itself.
    #[error("Session {0} is busy")]
    Busy(String),
    /// The session has no message with that id. Not retryable.
    #[error("message not found: {0}")]
    MessageNotFound(String),
    /// The request is malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The runtime could not take its lock file in the data directory.
    #[error(transparent)]
    Lock(#[from] crate::owner::LockError),
    /// A child run on another node of the cluster failed there, or that node was lost.
    #[error("{0}")]
    Elsewhere(String),
}
