//! Shared test fixtures of taskforce (a dev-dependency only): fake OpenAI and Anthropic
//! servers speaking the streaming wire formats, and waiting on state and on events instead of
//! sleeping for a guessed time.

pub mod fake_anthropic;
pub mod fake_openai;
pub mod wait;

pub use wait::{PATIENCE, eventually, eventually_async, next_millisecond, until_event};
