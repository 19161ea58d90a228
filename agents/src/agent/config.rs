//! The config form of an agent: `[agent.NAME]` tables and agent markdown frontmatter.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AgentMode;
use crate::model::ModelRef;
use crate::permission::PermissionConfig;

/// One agent as written in config or markdown; every field optional. A key not listed here is
/// an error (OpenCode passes unknown keys to the provider; here they go under `options`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The model as `provider/model`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::config::serde_model"
    )]
    pub model: Option<ModelRef>,
    /// The provider-specific variant (for example a reasoning effort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, alias = "topP", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// The system prompt (the body of a markdown file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Deprecated `{tool: bool}` map, turned into permission rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<IndexMap<String, bool>>,
    /// `true` removes the agent, built-ins included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable: Option<bool>,
    /// `true`: the task tool refuses to start this agent (`SUBAGENT_DISABLED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_task: Option<bool>,
    /// When to use the agent; shown to models choosing a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who may run the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<AgentMode>,
    /// Hidden from the `@` autocomplete menu and agent pickers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
    /// Options passed to the provider; unknown keys are added here too.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub options: IndexMap<String, Value>,
    /// A colour for user interfaces (`#RRGGBB` or a theme token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// The most agentic steps per prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// Deprecated spelling of `steps`.
    #[serde(default, rename = "maxSteps", skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Permission rules appended after the agent's defaults and the global rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionConfig>,
    /// A display name; the agent's name is its key or file path, so this is informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl AgentConfig {
    /// The step limit, preferring `steps` over the deprecated `maxSteps`.
    pub fn step_limit(&self) -> Option<u32> {
        self.steps.or(self.max_steps)
    }

    /// The permission config including the legacy `tools` map, which explicit keys override.
    pub fn effective_permission(&self) -> Option<PermissionConfig> {
        legacy_then_explicit(self.tools.as_ref(), self.permission.as_ref())
    }
}

/// The legacy `tools` map as rules, with an explicit permission config applied over it.
pub(crate) fn legacy_then_explicit(
    tools: Option<&IndexMap<String, bool>>,
    permission: Option<&PermissionConfig>,
) -> Option<PermissionConfig> {
    match (tools, permission) {
        (None, None) => None,
        (None, Some(p)) => Some(p.clone()),
        (Some(t), p) => {
            let mut out = crate::permission::from_tools(t);
            if let Some(p) = p {
                out.merge_over(p);
            }
            Some(out)
        }
    }
}
