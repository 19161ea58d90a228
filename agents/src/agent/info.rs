//! AgentInfo: one resolved agent, as the registry serves it and OpenCode clients read it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::AgentMode;
use crate::model::ModelRef;
use crate::permission::{self, Evaluation, Ruleset};

/// A resolved agent: built-in defaults, config and markdown applied, permissions flattened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentInfo {
    /// The agent's name: its config key or its markdown path without `.md`.
    pub name: String,
    /// When to use the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who may run the agent.
    pub mode: AgentMode,
    /// Whether the agent is one of taskforce's built-ins.
    pub native: bool,
    /// Whether the agent is hidden from pickers and the `@` menu.
    pub hidden: bool,
    /// Nucleus sampling.
    #[serde(default, rename = "topP", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// A colour for user interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// The agent's whole ruleset, in evaluation order (the last match wins).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<permission::Rule>))]
    pub permission: Ruleset,
    /// The agent's own model; without one it uses the caller's or the default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The provider-specific variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Options passed to the provider.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    #[serde(default)]
    pub options: Map<String, Value>,
    /// The most agentic steps per prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// Whether the task tool refuses to start this agent (`SUBAGENT_DISABLED`); it is also
    /// left out of the task tool's agent listing.
    #[serde(default, rename = "disableTask", skip_serializing_if = "is_false")]
    pub disable_task: bool,
    /// Tools hidden from this agent's model because its rules deny them outright.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    #[serde(default, rename = "disabledTools")]
    pub disabled_tools: Vec<String>,
    /// Where each rule of `permission` came from, index for index.
    #[serde(skip)]
    pub origins: Vec<RuleOrigin>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Where a rule of an agent's ruleset came from; answers "why was this denied?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleOrigin {
    /// The defaults every agent starts from.
    Defaults,
    /// The rules letting every agent read the skills' folders.
    Skills,
    /// The built-in definition of this agent.
    Builtin,
    /// The global `[permission]` config (and the legacy global `tools` map).
    GlobalConfig,
    /// This agent's own config: `[agent.NAME]` or its markdown file.
    AgentConfig,
    /// The rule that keeps truncated tool output readable.
    ToolOutput,
}

impl RuleOrigin {
    /// A short phrase naming the origin, for people.
    pub fn describe(&self) -> &'static str {
        match self {
            RuleOrigin::Defaults => "taskforce's defaults for every agent",
            RuleOrigin::Skills => "taskforce's rule letting agents read the skills' folders",
            RuleOrigin::Builtin => "the built-in definition of this agent",
            RuleOrigin::GlobalConfig => "the global [permission] config",
            RuleOrigin::AgentConfig => "this agent's own config",
            RuleOrigin::ToolOutput => "taskforce's rule keeping truncated tool output readable",
        }
    }
}

impl AgentInfo {
    /// An agent with no rules and no settings yet: mode `all`, visible.
    pub fn new(name: impl Into<String>, native: bool) -> Self {
        AgentInfo {
            name: name.into(),
            description: None,
            mode: AgentMode::All,
            native,
            hidden: false,
            top_p: None,
            temperature: None,
            color: None,
            permission: Vec::new(),
            model: None,
            variant: None,
            prompt: None,
            options: Map::new(),
            steps: None,
            disable_task: false,
            disabled_tools: Vec::new(),
            origins: Vec::new(),
        }
    }

    /// Whether the task tool may start this agent (its mode is not `primary`).
    pub fn is_subagent(&self) -> bool {
        self.mode != AgentMode::Primary
    }

    /// Decides `permission` for `pattern` against this agent's rules alone.
    pub fn evaluate(&self, permission: &str, pattern: &str) -> Evaluation<'_> {
        permission::evaluate(permission, pattern, &[&self.permission])
    }

    /// The origin of the rule at `index` of `permission`, when known.
    pub fn origin_of(&self, index: usize) -> Option<&RuleOrigin> {
        self.origins.get(index)
    }

    /// The index of `rule` (a reference into `permission`) in the ruleset.
    pub fn index_of(&self, rule: &permission::Rule) -> Option<usize> {
        self.permission.iter().position(|r| std::ptr::eq(r, rule))
    }
}
