//! The permission engine: rules, wildcard matching, evaluation, config form, hidden tools, and
//! what a bash command line runs.
//!
//! Pure functions only. Evaluation is last-match-wins over the concatenation of rulesets,
//! and the default when nothing matches is `ask`, as in OpenCode's `PermissionNext`.

mod ask;
pub mod bash;
mod config;
mod disabled;
mod evaluate;
mod layers;
mod request;
mod rule;
pub mod wildcard;

pub use ask::{AskDecision, PermissionAsk, PermissionError, decide, decide_with_approvals};
pub use config::{PermissionConfig, PermissionValue, expand_home, from_config, from_tools};
pub use disabled::{disabled, permission_for_tool};
pub use evaluate::{Evaluation, compact, evaluate, merge};
pub use layers::Layers;
pub use request::{AskOrigin, PermissionReply, PermissionRequest, ToolRef};
pub use rule::{Action, Rule, Ruleset};
