//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): request bodies as the
//! handlers read them, and a reconnecting client's `Last-Event-ID` against a replay ring.

use taskforce_actors::bus::{Envelope, Event};
use taskforce_actors::{PromptInput, ShellInput};
use taskforce_agents::id::SessionId;

use super::events::{EventLog, LastEventId};
use super::extract::parse_body;
use super::routes::message::CommandBody;
use super::routes::permission::{ReplyBody, RespondBody};
use super::routes::session::{CreateBody, ForkBody, SummarizeBody, UpdateBody};

/// Reads `bytes` as the JSON body of the route `route` picks (every body the API takes, in
/// turn); answers whether it was accepted.
pub fn request_body(route: u8, bytes: &[u8]) -> bool {
    match route % 9 {
        0 => parse_body::<PromptInput>(bytes).is_ok(),
        1 => parse_body::<CommandBody>(bytes).is_ok(),
        2 => parse_body::<ShellInput>(bytes).is_ok(),
        3 => parse_body::<CreateBody>(bytes).is_ok(),
        4 => parse_body::<UpdateBody>(bytes).is_ok(),
        5 => parse_body::<ForkBody>(bytes).is_ok(),
        6 => parse_body::<SummarizeBody>(bytes).is_ok(),
        7 => parse_body::<ReplyBody>(bytes).is_ok(),
        _ => parse_body::<RespondBody>(bytes).is_ok(),
    }
}

/// A client reconnecting with `header` as its `Last-Event-ID` to a replay ring of `max_bytes`
/// that has seen `events` events: answers how many frames it is sent and whether it must
/// resync.
pub fn last_event_id(header: &str, events: u16, max_bytes: u16) -> (usize, bool) {
    let log = EventLog::new("/project".into(), usize::from(max_bytes), 7);
    let session = SessionId::new();
    for seq in 1..=u64::from(events) {
        log.push(&Envelope {
            seq,
            event: Event::SessionIdle {
                session_id: session.clone(),
            },
        });
    }
    let last = LastEventId::parse(header);
    let join = log.join(Some(&last));
    let mut sent = 0;
    let mut after = join.after;
    while let Ok(frames) = log.after(after, 64) {
        let Some(last) = frames.last() else {
            break;
        };
        after = last.seq;
        sent += frames.len();
    }
    (sent, join.resync)
}
