//! taskforce-actors: how agents run — sessions, the supervisor, the bus and the store.
//!
//! The runtime lands on top of [`taskforce_agents`]; this crate re-exports it so embedders can
//! depend on one crate.

pub use taskforce_agents as agents;
