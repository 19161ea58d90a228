//! A bash command line as the bash permission rules read it: parsed with tree-sitter, wrappers
//! peeled, `-c` strings and `eval` arguments read in turn.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let _ = taskforce_agents::permission::bash::commands(line);
});
