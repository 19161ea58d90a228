//! Layered configuration: built-in defaults < global file < project files < `--config` file <
//! environment, with agents and commands from markdown files merged in at their layer.
//!
//! Every layer is read with the `config` crate and checked on its own first, so an error names
//! the file (or environment variable) and the key that is wrong; then the layers are merged in
//! order (maps deep-merge, keys keep their first position, later values win) and checked again.

mod check;
mod cluster;
mod env;
mod error;
pub mod keybinds;
mod keys;
mod known;
mod layers;
mod load;
mod mcp;
mod merge;
mod paths;
pub mod redact;
mod schema;
mod search;
pub mod serde_duration;
pub mod serde_model;
mod store;

pub use cluster::{ClusterConfig, DEFAULT_CLUSTER_PREFIX, check_name as check_cluster_name};
pub use error::{ConfigError, UnconfiguredProvider, UnknownKey};
pub use known::{KNOWN_PROVIDERS, KnownProvider, known_provider};
pub use load::{LoadOptions, LoadedConfig, load};
pub use mcp::{
    DEFAULT_MCP_CALL_TIMEOUT_MS, DEFAULT_MCP_CONNECT_TIMEOUT_MS, McpConfig, McpKind, mcp_tool_id,
    mcp_tool_prefix,
};
pub use merge::merge_json;
pub use paths::Paths;
pub use schema::{
    CompactionConfig, Config, CostConfig, DEFAULT_MAX_RETRIES, ExperimentalConfig, ModelConfig,
    ProviderConfig, ProviderKind, Secret, ServerConfig, SubagentConfig,
};
pub use search::{EXA_BASE_URL, SearchConfig, SearchEngine};
pub use store::{StoreBackend, StoreConfig, redacted_url};

#[cfg(test)]
mod tests;
