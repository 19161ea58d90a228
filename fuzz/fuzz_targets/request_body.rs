//! The JSON body of every route that takes one (the first byte picks the route), read as the
//! server's handlers read it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((route, body)) = data.split_first() else {
        return;
    };
    let _ = taskforce_server::fuzzing::request_body(*route, body);
});
