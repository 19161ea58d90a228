//! taskforce: an actor-based multi-agent runtime.
//!
//! This crate is how people reach taskforce: the `taskforce` command line and, for embedders,
//! a facade over the lower layers. `agents` says what an agent is (model, permissions,
//! registry, configuration); `actors` runs them.

pub use taskforce_actors as actors;
pub use taskforce_agents as agents;
pub use taskforce_agents::agent::{AgentInfo, AgentMode, Registry};
pub use taskforce_agents::config::{Config, LoadOptions, LoadedConfig, load as load_config};
pub use taskforce_agents::permission::{Action, Rule, Ruleset};
