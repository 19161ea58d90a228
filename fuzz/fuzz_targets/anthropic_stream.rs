//! A streaming response body as the anthropic adapter reads it, cut into network chunks at every
//! 0xFF byte (which never occurs in UTF-8 text).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let chunks: Vec<&[u8]> = data.split(|b| *b == 0xFF).collect();
    let _ = taskforce_agents::fuzzing::anthropic_stream(&chunks);
});
