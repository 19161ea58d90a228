mod bus;
mod commands;
#[cfg(feature = "openapi")]
mod openapi;
mod retries;
mod runtime;
mod store;
