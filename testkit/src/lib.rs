//! Shared test fixtures of taskforce (a dev-dependency only): fake OpenAI and Anthropic
//! servers speaking the streaming wire formats, a fake web (pages, search endpoints), scripted
//! answers for them, a throwaway project on disk, a fresh PostgreSQL schema per test, a NATS
//! prefix per test, a TCP proxy a test cuts and restores, and waiting on state and on events
//! instead of sleeping for a guessed time.

pub mod fake_anthropic;
pub mod fake_openai;
pub mod fake_web;
pub mod mcp;
pub mod nats;
pub mod postgres;
pub mod proxy;
#[cfg(feature = "pty")]
pub mod pty;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod sandbox;
pub mod script;
pub mod wait;

pub use sandbox::Sandbox;
pub use wait::{PATIENCE, eventually, eventually_async, next_millisecond, until_event};
