//! Permission wildcards: any value against any pattern (split at the first NUL byte).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (value, pattern) = text.split_once('\0').unwrap_or((text, "*"));
    let _ = taskforce_agents::permission::wildcard::matches(value, pattern);
});
