mod anthropic;
mod bus;
mod commands;
#[cfg(feature = "openapi")]
mod openapi;
mod permissions;
mod retries;
mod runtime;
mod store;
