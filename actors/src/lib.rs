//! taskforce-actors: how agents run — sessions, the supervisor, the bus and the store.
//!
//! [`Runtime`] is the public handle. Each live session is an actor whose mailbox takes prompts,
//! cancels and subtasks; a supervisor starts session actors on a pool of arbiters, keeps the
//! live tree and cancels whole subtrees; the [`bus`] fans every state change out; the [`store`]
//! keeps everything on disk. The actors and their messages are private: everything goes
//! through [`Runtime`].

pub mod bus;
pub mod cluster;
mod complete;
mod core;
mod error;
pub mod hooks;
mod id_map;
pub mod mcp;
mod owner;
pub mod permission;
pub mod question;
mod runtime;
mod session;
mod snapshot;
pub mod store;
mod subagent;
mod supervisor;
mod touch;

pub use error::RuntimeError;
pub use hooks::{HookCall, Hooks};
pub use owner::SessionLock;
pub use runtime::{
    GeneratedAgentFile, LockError, PendingWork, Runtime, RuntimeOptions, SessionPatch, SessionTree,
    ToolListItem, WorkWatch,
};
pub use session::{PartInput, PromptInput, STOPPED, SUMMARIZE, ShellInput, prompt_parts};
pub use taskforce_agents as agents;
