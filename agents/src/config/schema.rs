//! The typed shape of taskforce's configuration.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::agent::AgentConfig;
use crate::command::CommandConfig;
use crate::model::ModelRef;
use crate::permission::PermissionConfig;

/// The whole configuration after all layers are merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// A JSON schema reference, accepted and ignored (editors add it to JSON files).
    #[serde(default, rename = "$schema", skip_serializing)]
    pub schema: Option<String>,
    /// The default model as `provider/model`.
    #[serde(
        default,
        with = "super::serde_model",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<ModelRef>,
    /// The model for titles and other small jobs.
    #[serde(
        default,
        with = "super::serde_model",
        skip_serializing_if = "Option::is_none"
    )]
    pub small_model: Option<ModelRef>,
    /// The agent that runs prompts that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_agent: Option<String>,
    /// Where sessions and tool output are stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// Model providers by the id used in model strings.
    #[serde(default)]
    pub provider: IndexMap<String, ProviderConfig>,
    /// Agents to add or override, by name.
    #[serde(default)]
    pub agent: IndexMap<String, AgentConfig>,
    /// Slash commands by name.
    #[serde(default)]
    pub command: IndexMap<String, CommandConfig>,
    /// MCP servers by name; their tools are offered as `NAME_TOOL`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub mcp: IndexMap<String, super::McpConfig>,
    /// Global permission rules, appended after each agent's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionConfig>,
    /// Deprecated global `{tool: bool}` map, placed before `permission`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<IndexMap<String, bool>>,
    /// Limits for subagents.
    #[serde(default)]
    pub subagent: SubagentConfig,
    /// When long sessions are summarized and old tool output cleared.
    #[serde(default)]
    pub compaction: CompactionConfig,
    /// Settings of `taskforce serve`.
    #[serde(default)]
    pub server: ServerConfig,
    /// Joining a cluster of nodes over NATS JetStream.
    #[serde(default, skip_serializing_if = "super::ClusterConfig::is_default")]
    pub cluster: super::ClusterConfig,
    /// Settings that may change.
    #[serde(default)]
    pub experimental: ExperimentalConfig,
    /// The backend of `websearch` and `codesearch`; with none they are not offered.
    #[serde(default, skip_serializing_if = "super::SearchConfig::is_empty")]
    pub search: super::SearchConfig,
    /// The database of sessions, messages and parts; SQLite in the data directory when left
    /// out.
    #[serde(default, skip_serializing_if = "super::StoreConfig::is_empty")]
    pub store: super::StoreConfig,
    /// Short model names (`sonnet`, `haiku`…) used by Claude Code agent files, as `provider/model`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub model_aliases: IndexMap<String, String>,
    /// TUI keybinds by OpenCode's action names (`session_parent = "<leader>up"`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub keybinds: IndexMap<String, String>,
    /// Whether steps that may change files first snapshot the worktree (in a separate git store
    /// under the data directory), so that a turn can be undone; on unless `false`, and only in a
    /// git project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<bool>,
}

impl Config {
    /// The provider ids models may name: the configured ones, then those known by name (see
    /// [`KNOWN_PROVIDERS`](super::KNOWN_PROVIDERS)), then the built-in `scripted` (always
    /// available), each once.
    pub fn available_providers(&self) -> Vec<String> {
        let mut out: Vec<String> = self.provider.keys().cloned().collect();
        let builtin = super::KNOWN_PROVIDERS
            .iter()
            .map(|p| p.id)
            .chain([crate::provider::SCRIPTED_PROVIDER]);
        for id in builtin {
            if !out.iter().any(|p| p == id) {
                out.push(id.into());
            }
        }
        out
    }

    /// How often a failed call to `provider` is retried: its `max_retries`, else
    /// [`DEFAULT_MAX_RETRIES`].
    pub fn max_retries(&self, provider: &str) -> u32 {
        self.provider
            .get(provider)
            .and_then(|p| p.max_retries)
            .unwrap_or(DEFAULT_MAX_RETRIES)
    }
}

/// How often a failed model call is retried when the provider sets no `max_retries`.
pub const DEFAULT_MAX_RETRIES: u32 = 4;

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat-completions endpoint.
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
    /// A deterministic model that plays a script (offline demo and tests).
    Scripted,
}

impl ProviderKind {
    /// Every kind, as written in config.
    pub const NAMES: [&'static str; 3] = ["openai", "anthropic", "scripted"];

    /// The kind a provider id implies when its `type` is not written: a provider known by name
    /// (`openai`, `groq`, `anthropic`, …) or `scripted`.
    pub fn from_provider_id(id: &str) -> Option<ProviderKind> {
        match id {
            "scripted" => Some(ProviderKind::Scripted),
            _ => super::known_provider(id).map(|p| p.kind),
        }
    }
}

/// One model provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The wire format; may be left out for `scripted` and the providers known by name.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ProviderKind>,
    /// The API base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable that holds the API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The API key itself (prefer `api_key_env`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// Extra HTTP headers sent with every request.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub headers: IndexMap<String, String>,
    /// How often a failed request is retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// How long a request waits for the response headers before it fails (retryable); 120 s
    /// when left out.
    #[serde(
        default,
        with = "super::serde_duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    /// How long a streaming response may send no data before it fails (retryable); 120 s when
    /// left out.
    #[serde(
        default,
        with = "super::serde_duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub chunk_timeout: Option<Duration>,
    /// Per-model limits and prices, by model id.
    #[serde(default)]
    pub models: IndexMap<String, ModelConfig>,
    /// The script a `scripted` provider plays: a built-in script name (`demo`, `echo`) or the
    /// path of a script file; `demo` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
}

/// Limits and prices of one model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// The most output tokens per response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
    /// Prices in USD per million tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostConfig>,
    /// Whether the model takes images and PDFs (models.dev's `attachment`); `false`: those
    /// sent to it (a prompt's files, an image a tool fetched) are replaced by a note saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<bool>,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// Per million input tokens.
    #[serde(default)]
    pub input: f64,
    /// Per million output tokens.
    #[serde(default)]
    pub output: f64,
    /// Per million tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read: f64,
    /// Per million tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write: f64,
}

/// Compaction of long sessions: when and how a session's history is summarized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionConfig {
    /// Summarize the session automatically when a step overflows the model's context.
    pub auto: bool,
    /// Clear the output of old tool calls (beyond the newest 40,000 tokens of them).
    pub prune: bool,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            auto: true,
            prune: true,
        }
    }
}

/// Limits for subagents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubagentConfig {
    /// `false` switches subagents off: the task tool is not offered and calls get
    /// `SUBAGENTS_DISABLED`.
    pub enabled: bool,
    /// How deep task calls nest: 1 means subagents cannot call task.
    pub max_depth: u32,
    /// Running children per parent; more wait their turn (FIFO).
    pub max_concurrent: u32,
    /// Running children in the whole runtime; more wait their turn (FIFO).
    pub max_total: u32,
    /// Children created in one root session tree (descendants included); a task call past it
    /// gets `SUBAGENT_LIMIT_REACHED` at once.
    pub max_per_session: u32,
    /// Hard cap on one child run.
    #[serde(with = "super::serde_duration")]
    pub timeout: Duration,
    /// A child with no model or tool event for this long is ended.
    #[serde(with = "super::serde_duration")]
    pub idle_timeout: Duration,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        SubagentConfig {
            enabled: true,
            max_depth: 1,
            max_concurrent: 8,
            max_total: 64,
            max_per_session: 100,
            timeout: Duration::from_secs(15 * 60),
            idle_timeout: Duration::from_secs(3 * 60),
        }
    }
}

/// Settings of the HTTP/SSE server (`taskforce serve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Host names accepted in the `Host` header besides the bound address and `localhost`.
    pub allowed_hosts: Vec<String>,
    /// The most bytes of events kept for clients that reconnect with `Last-Event-ID`.
    pub replay_bytes: u64,
    /// The most open connections from one IP address; more are answered 503.
    pub max_connections_per_ip: u32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            allowed_hosts: Vec::new(),
            replay_bytes: 8 * 1024 * 1024,
            max_connections_per_ip: 256,
        }
    }
}

/// Settings that may change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExperimentalConfig {
    /// Tools only primary sessions may use; denied and hidden in child sessions.
    pub primary_tools: Vec<String>,
    /// Milliseconds an MCP tool call may take when its server sets no `timeout` (60,000 when
    /// left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_timeout: Option<u64>,
}

/// A secret string: read normally, never printed (shown as `[redacted]`).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl Secret {
    /// The secret's text, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", super::redact::REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::redact::REDACTED)
    }
}
