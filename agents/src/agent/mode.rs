//! The mode of an agent: who may run it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Whether an agent drives a session, runs only as a subagent, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum AgentMode {
    /// Runs root sessions; not offered to the task tool.
    Primary,
    /// Runs only in child sessions started by the task tool, a subtask or a mention.
    Subagent,
    /// Both primary and subagent.
    All,
}

impl AgentMode {
    /// The lowercase name used in config files and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentMode::Primary => "primary",
            AgentMode::Subagent => "subagent",
            AgentMode::All => "all",
        }
    }
}

impl fmt::Display for AgentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
