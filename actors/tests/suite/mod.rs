mod bus;
mod runtime;
mod store;
