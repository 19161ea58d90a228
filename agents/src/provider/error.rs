//! Provider errors, each classified retryable or not.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with an HTTP error status. Retryable for 408, 429 and 5xx.
    #[error("{provider} returned HTTP {status}: {}", short(body))]
    Http {
        /// The provider id.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The response body.
        body: String,
        /// What `retry-after` / `retry-after-ms` asked for, if anything.
        retry_after: Option<Duration>,
    },
    /// The API key was refused (HTTP 401/403). Not retryable.
    #[error("{provider} refused the API key: {message}")]
    Auth {
        /// The provider id.
        provider: String,
        /// What the provider said.
        message: String,
    },
    /// The request does not fit the model's context window. Not retryable.
    #[error("context window exceeded: {message}")]
    ContextOverflow {
        /// What the provider said.
        message: String,
    },
    /// The connection failed or was reset. Retryable.
    #[error("connection to {provider} failed: {message}")]
    Connection {
        /// The provider id.
        provider: String,
        /// What failed.
        message: String,
    },
    /// The stream ended before a finish event. Retryable.
    #[error("the response stream from {provider} ended early: {message}")]
    StreamCut {
        /// The provider id.
        provider: String,
        /// What happened.
        message: String,
    },
    /// The provider went quiet: no response headers within the provider's `timeout`, or no
    /// stream data within its `chunk_timeout`. Retryable.
    #[error("{provider} did not answer in time: {message}")]
    Timeout {
        /// The provider id.
        provider: String,
        /// Which wait ran out, and how long it was.
        message: String,
    },
    /// The provider sent something that is not its wire format. Not retryable.
    #[error("invalid response from {provider}: {message}")]
    Decode {
        /// The provider id.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// No provider or model of that name is configured. Not retryable.
    #[error("model not found: {0}")]
    ModelNotFound(String),
    /// A model names a provider that is neither configured nor known by name. Not retryable.
    #[error(
        "unknown provider \"{provider}\": configure [provider.{provider}] with type and base_url in taskforce.toml (known providers: {})",
        .known.join(", ")
    )]
    UnknownProvider {
        /// The provider id as named.
        provider: String,
        /// The providers that are configured or known by name.
        known: Vec<String>,
    },
    /// The provider's key is read from an environment variable that is not set. Not retryable.
    #[error("provider \"{provider}\" needs an API key: set {var}")]
    MissingKey {
        /// The provider id.
        provider: String,
        /// The environment variable to set.
        var: String,
    },
    /// The provider's configuration is unusable (missing key, bad script). Not retryable.
    #[error("provider {provider}: {message}")]
    Config {
        /// The provider id.
        provider: String,
        /// What is wrong.
        message: String,
    },
}

impl ProviderError {
    /// Whether trying the same call again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                *status == 408 || *status == 429 || (500..600).contains(status)
            }
            ProviderError::Connection { .. }
            | ProviderError::StreamCut { .. }
            | ProviderError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// The body cut to a readable length for messages.
fn short(body: &str) -> String {
    let body = body.trim();
    if body.chars().count() > 500 {
        format!("{}…", body.chars().take(500).collect::<String>())
    } else {
        body.to_string()
    }
}
