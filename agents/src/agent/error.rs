//! Errors of resolving agents.

/// Why an agent could not be resolved. None is retryable without a change of config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// No agent has that name.
    #[error("unknown agent \"{name}\"; known agents: {}", known.join(", "))]
    NotFound {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// `default_agent` names no agent.
    #[error("default agent \"{name}\" not found; known agents: {}", known.join(", "))]
    DefaultNotFound {
        /// The configured default.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// `default_agent` names a subagent, which cannot run a root session.
    #[error("default agent \"{0}\" is a subagent")]
    DefaultIsSubagent(String),
    /// `default_agent` names a hidden agent.
    #[error("default agent \"{0}\" is hidden")]
    DefaultIsHidden(String),
    /// No agent can be the default: every agent is a subagent or hidden.
    #[error("no primary visible agent found")]
    NoPrimary,
    /// A built-in agent file does not parse (a build defect, caught by tests).
    #[error("built-in agent \"{name}\" is invalid: {message}")]
    Builtin {
        /// The built-in agent.
        name: String,
        /// What is wrong.
        message: String,
    },
}
