mod bus;
mod commands;
mod retries;
mod runtime;
mod store;
mod subagents;
