//! Markdown files with YAML frontmatter (agents and commands), as read from a project.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = taskforce_agents::markdown::parse(text, std::path::Path::new("agent/fuzz.md"));
});
