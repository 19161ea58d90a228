mod anthropic;
mod commands;
mod config;
mod fixture;
#[cfg(feature = "openapi")]
mod openapi;
mod providers;
mod registry;
mod tools;
