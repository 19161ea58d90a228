//! The rules every agent starts from.

use std::path::Path;

use crate::permission::{Action, Rule, Ruleset};

/// The globs of the folder where over-long tool outputs are saved: `<data>/tool-output/*`, then
/// the same glob of its real form when links lead elsewhere (tools judge paths in both forms,
/// so both must be allowed).
pub fn tool_output_globs(data_dir: &Path) -> Vec<String> {
    both_forms(&data_dir.join("tool-output"))
}

/// `<dir>/*`, then `<real form of dir>/*` when it differs.
pub(crate) fn both_forms(dir: &Path) -> Vec<String> {
    let given = format!("{}/*", dir.display());
    let real = format!("{}/*", crate::tool::paths::real(dir).display());
    if real == given {
        vec![given]
    } else {
        vec![given, real]
    }
}

/// The shared defaults, in order: allow everything, then ask or deny the sensitive cases.
pub fn default_rules(data_dir: &Path) -> Ruleset {
    use Action::{Allow, Ask, Deny};
    let mut rules = vec![
        Rule::new("*", "*", Allow),
        Rule::new("doom_loop", "*", Ask),
        Rule::new("external_directory", "*", Ask),
    ];
    for glob in tool_output_globs(data_dir) {
        rules.push(Rule::new("external_directory", glob, Allow));
    }
    rules.extend([
        Rule::new("question", "*", Deny),
        Rule::new("plan_enter", "*", Deny),
        Rule::new("plan_exit", "*", Deny),
        Rule::new("read", "*", Allow),
        Rule::new("read", "*.env", Ask),
        Rule::new("read", "*.env.*", Ask),
        Rule::new("read", "*.env.example", Allow),
    ]);
    rules
}
