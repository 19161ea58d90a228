//! A reconnecting client's `Last-Event-ID` against a replay ring: the first two bytes say how
//! many events the ring has seen, the next two how many bytes it keeps, the rest is the header.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let events = u16::from_le_bytes([data[0], data[1]]) % 300;
    let max_bytes = u16::from_le_bytes([data[2], data[3]]);
    let Ok(header) = std::str::from_utf8(&data[4..]) else {
        return;
    };
    let _ = taskforce_server::fuzzing::last_event_id(header, events, max_bytes);
});
