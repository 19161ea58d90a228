//! Shared test fixtures of taskforce (a dev-dependency only): waiting on state and on events
//! instead of sleeping for a guessed time.

pub mod wait;

pub use wait::{PATIENCE, eventually, eventually_async, next_millisecond, until_event};
