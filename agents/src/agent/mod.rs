//! Agents: what they are (AgentInfo), how they are written (AgentConfig, Claude Code files),
//! the built-ins, and the registry that resolves them from configuration.

mod builtin;
mod claude;
mod config;
mod defaults;
mod error;
mod generate;
mod info;
mod mode;
mod registry;

pub use builtin::BUILTIN_AGENTS;
pub use claude::{CLAUDE_KEYS, ClaudeAgent, ClaudeError, from_claude};
pub use config::AgentConfig;
pub use defaults::{default_rules, tool_output_globs};
pub use error::AgentError;
pub use generate::{
    GENERATE_PROMPT, GenerateError, GeneratedAgent, agent_markdown, generation_request,
    parse_generated,
};
pub use info::{AgentInfo, RuleOrigin};
pub use mode::AgentMode;
pub use registry::Registry;
