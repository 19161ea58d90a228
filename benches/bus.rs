//! Bus delivery: events published to 100 subscribers, each reading every event.
//!
//! `cargo bench --profile dist --bench bus`. Prints events/s (each event delivered to all
//! subscribers).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Instant;

use futures::StreamExt;
use support::in_system;
use taskforce::actors::bus::{BusHandle, BusItem, Event, Filter, SessionStatus};
use taskforce::agents::id::SessionId;

const SUBSCRIBERS: usize = 100;
const EVENTS: usize = 200_000;

fn main() {
    in_system(async {
        let bus = BusHandle::start(EVENTS + 1);
        let id = SessionId::new();
        let mut readers = Vec::new();
        for _ in 0..SUBSCRIBERS {
            let mut sub = bus.subscribe(Filter::All);
            readers.push(tokio::spawn(async move {
                let mut seen = 0usize;
                let mut lagged = 0u64;
                while seen < EVENTS {
                    match sub.next().await {
                        Some(BusItem::Event(_)) => seen += 1,
                        Some(BusItem::Lagged(n)) => {
                            lagged += n;
                            seen += usize::try_from(n).unwrap_or(usize::MAX);
                        }
                        None => break,
                    }
                }
                lagged
            }));
        }
        let start = Instant::now();
        for _ in 0..EVENTS {
            bus.publish(Event::SessionStatus {
                session_id: id.clone(),
                status: SessionStatus::Busy,
            });
        }
        let published = start.elapsed();
        let mut lagged = 0;
        for r in readers {
            lagged += r.await.unwrap();
        }
        let delivered = start.elapsed();
        println!(
            "bus: {EVENTS} events to {SUBSCRIBERS} subscribers: published in {published:?}, all delivered in {delivered:?} → {:.0} events/s ({:.0} deliveries/s), {lagged} lagged",
            EVENTS as f64 / delivered.as_secs_f64(),
            (EVENTS * SUBSCRIBERS) as f64 / delivered.as_secs_f64(),
        );
    });
}
