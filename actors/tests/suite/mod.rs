mod bus;
mod commands;
mod permissions;
mod retries;
mod runtime;
mod store;
