mod bus;
mod commands;
mod runtime;
mod store;
