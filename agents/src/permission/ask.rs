//! A tool's permission ask and the ways it can be refused.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Rule;

/// What a tool asks permission for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PermissionAsk {
    /// The permission (`bash`, `edit`, `read`, `task`, `external_directory`, `doom_loop`…).
    pub permission: String,
    /// The values asked about, each evaluated in order.
    pub patterns: Vec<String>,
    /// The patterns an "always" reply approves from then on.
    pub always: Vec<String>,
    /// Details for the user (the command, the diff…).
    pub metadata: Map<String, Value>,
}

/// Why a permission ask failed; the `Display` text is what the model sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PermissionError {
    /// A rule denies the call.
    #[error(
        "The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules {}",
        serde_json::to_string(.rules).unwrap_or_default()
    )]
    Denied {
        /// The rules whose permission matches the ask.
        rules: Vec<Rule>,
    },
    /// The user rejected the call; the loop stops.
    #[error("The user rejected permission to use this specific tool call.")]
    Rejected,
    /// The user rejected the call with feedback; the loop continues.
    #[error(
        "The user rejected permission to use this specific tool call with the following feedback: {0}"
    )]
    Corrected(String),
}
