//! The cluster bridge's cost: events/s published locally without and with the bridge (and how
//! fast the bridge stores them in JetStream), and the latency from a publish on node A to its
//! delivery on node B's bus.
//!
//! Needs a NATS server with JetStream: `TASKFORCE_TEST_NATS_URL=nats://127.0.0.1:4222 cargo
//! bench --profile dist --bench cluster` (it uses a prefix of its own and deletes it after).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use support::{Bench, in_system, summary};
use taskforce::actors::bus::{BusItem, Event, Filter, SessionStatus};
use taskforce::actors::{Runtime, RuntimeOptions};
use taskforce::agents::id::SessionId;
use taskforce_testkit::nats::TestNats;

const EVENTS: usize = 100_000;
const LATENCY_SAMPLES: usize = 2_000;

fn busy(id: &SessionId) -> Event {
    Event::SessionStatus {
        session_id: id.clone(),
        status: SessionStatus::Busy,
    }
}

async fn start(bench: &Bench, cluster: bool) -> Runtime {
    let mut options: RuntimeOptions = bench.options();
    options.cluster = cluster;
    options.bus_capacity = EVENTS + 16;
    Runtime::start(options).await.expect("runtime starts")
}

/// Publishes `EVENTS` events on `rt`; answers how long the publishing took.
fn publish_all(rt: &Runtime) -> Duration {
    let id = SessionId::new();
    let start = Instant::now();
    for _ in 0..EVENTS {
        rt.publish(busy(&id));
    }
    start.elapsed()
}

fn main() {
    let Some(nats) = TestNats::fresh("bench") else {
        return;
    };
    let config = |node: &str| {
        format!(
            "model = \"scripted/echo\"\n{}",
            nats.cluster_toml(node, "10s")
        )
    };
    let (alone, a, b) = (config("alone"), config("a"), config("b"));
    in_system(async move {
        let config = |node: &str| match node {
            "alone" => alone.clone(),
            "a" => a.clone(),
            _ => b.clone(),
        };
        // Without the bridge.
        let alone = Bench::configured(&config("alone"));
        let rt = start(&alone, false).await;
        let took = publish_all(&rt);
        println!(
            "cluster: without the bridge: {EVENTS} events published in {took:?} → {:.0} events/s",
            EVENTS as f64 / took.as_secs_f64()
        );
        rt.stop(Duration::from_secs(5)).await;

        // With the bridge: what the local publisher pays, and how fast JetStream stores them.
        let (bench_a, bench_b) = (
            Bench::configured(&config("a")),
            Bench::configured(&config("b")),
        );
        let a = start(&bench_a, true).await;
        let b = start(&bench_b, true).await;
        let cluster = a.cluster().unwrap().clone();
        let started = Instant::now();
        let took = publish_all(&a);
        let stored = cluster.published(Duration::from_secs(600)).await;
        let all_stored = started.elapsed();
        println!(
            "cluster: with the bridge: {EVENTS} events published in {took:?} → {:.0} events/s locally; all stored in JetStream after {all_stored:?} → {:.0} events/s (last stream seq {stored:?})",
            EVENTS as f64 / took.as_secs_f64(),
            EVENTS as f64 / all_stored.as_secs_f64()
        );

        // Latency: one event at a time from A's bus to B's bus, once B has taken the burst.
        let fed = b.cluster().unwrap().clone();
        while fed.bridge().received < EVENTS as u64 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!(
            "cluster: node B had every event of the burst in its bus after {:?}",
            started.elapsed()
        );
        let mut on_b = b.subscribe(Filter::All);
        let id = SessionId::new();
        let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
        let mut skipped = 0usize;
        for _ in 0..LATENCY_SAMPLES {
            let sent = Instant::now();
            a.publish(busy(&id));
            loop {
                match on_b.next().await {
                    Some(BusItem::Event(e)) if e.event.session_id() == Some(&id) => break,
                    Some(_) => skipped += 1,
                    None => panic!("node B's bus closed"),
                }
            }
            samples.push(sent.elapsed());
        }
        let (median, p95, mean) = summary(&mut samples);
        println!(
            "cluster: publish on node A → delivered on node B's bus: median {median:?}, p95 {p95:?}, mean {mean:?} ({LATENCY_SAMPLES} events, {skipped} earlier events skipped)"
        );
        a.stop(Duration::from_secs(5)).await;
        b.stop(Duration::from_secs(5)).await;
    });
    drop(nats);
}
