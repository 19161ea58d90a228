//! The config form of a command: `[command.NAME]` tables and command markdown frontmatter.

use serde::{Deserialize, Serialize};

use crate::model::ModelRef;

/// One command as written in config or markdown (the body of a markdown file is `template`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    /// The prompt template, with `$1..$n` and `$ARGUMENTS` placeholders.
    pub template: String,
    /// What the command does, for menus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The agent that runs it; the caller's agent when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model that runs it, as `provider/model`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::config::serde_model"
    )]
    pub model: Option<ModelRef>,
    /// `true` runs it as a subtask in a child session; `false` never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtask: Option<bool>,
}
