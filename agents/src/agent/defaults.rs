//! The rules every agent starts from (reference §3.8).

use std::path::Path;

use crate::permission::{Action, Rule, Ruleset};

/// The glob of the folder where over-long tool outputs are saved: `<data>/tool-output/*`.
pub fn tool_output_glob(data_dir: &Path) -> String {
    format!("{}/*", data_dir.join("tool-output").display())
}

/// The shared defaults, in order: allow everything, then ask or deny the sensitive cases.
pub fn default_rules(data_dir: &Path) -> Ruleset {
    use Action::{Allow, Ask, Deny};
    vec![
        Rule::new("*", "*", Allow),
        Rule::new("doom_loop", "*", Ask),
        Rule::new("external_directory", "*", Ask),
        Rule::new("external_directory", tool_output_glob(data_dir), Allow),
        Rule::new("question", "*", Deny),
        Rule::new("plan_enter", "*", Deny),
        Rule::new("plan_exit", "*", Deny),
        Rule::new("read", "*", Allow),
        Rule::new("read", "*.env", Ask),
        Rule::new("read", "*.env.*", Ask),
        Rule::new("read", "*.env.example", Allow),
    ]
}
