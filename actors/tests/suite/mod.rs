mod anthropic;
mod background;
mod background_limits;
mod bus;
mod commands;
mod compaction;
mod generate;
#[cfg(feature = "openapi")]
mod openapi;
mod permissions;
mod retries;
mod runtime;
mod store;
mod subagent_limits;
mod subagent_parallel;
mod subagent_timeouts;
mod subagents;
mod titles;
