//! taskforce-agents: what an agent is and can do.
//!
//! The lowest layer of taskforce. It holds the domain model (sessions, messages, parts), the
//! permission engine, the agent registry, skills, slash-command definitions and the layered
//! configuration. It runs no actors and owns no I/O loops; the `actors` crate builds on it.

pub mod agent;
pub mod command;
pub mod config;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod id;
pub mod markdown;
pub mod model;
pub mod permission;
pub mod provider;
pub mod question;
pub mod skill;
pub mod tool;
