//! Slash commands: definitions from config and markdown, and template expansion.
//!
//! Running a command (shell substitutions, file and agent references, subtasks) belongs to the
//! runtime; this module knows what a command is and how its template takes arguments.

mod config;
mod info;
mod template;

pub use config::CommandConfig;
pub use info::{CommandInfo, CommandSource, Commands, UnknownCommand};
pub use template::{expand, hints, split_arguments};
