//! Cancel propagation: a session tree 3 levels deep with 10 children per node (root → 10 →
//! 100 → 1,000 sessions, 1,111 in all) whose leaves stall in their model call, cancelled at the
//! root once every session runs. Measures the time from the cancel call until every session is
//! idle (the runtime's status map is empty and the bus has announced 1,111 `session.idle`).
//!
//! `cargo bench --bench cancel [-- ROUNDS]` (default 3 rounds, a fresh tree each). Budget: 20 ms.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use support::{Bench, in_system, summary};
use taskforce::actors::PromptInput;
use taskforce::actors::bus::{BusItem, Event, Filter};

const FANOUT: usize = 10;
const SESSIONS: usize = 1 + FANOUT + FANOUT * FANOUT + FANOUT * FANOUT * FANOUT;

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3);
    let calls: Vec<serde_json::Value> = (0..FANOUT)
        .map(|i| json!({"name": "task", "input": {"description": format!("part {i}"), "prompt": "split it up", "subagent_type": "general"}}))
        .collect();
    let script = json!({"rules": [
        {"when": {"agent": "build", "last_role": "user"}, "reply": {"tool_calls": calls}},
        // Levels 1 and 2 may still delegate (they are offered the task tool).
        {"when": {"agent": "general", "tool": "task", "last_role": "user"}, "reply": {"tool_calls": calls}},
        // The leaves (level 3) stall: an hour before their first chunk.
        {"when": {"agent": "general", "no_tool": "task"}, "reply": {"text": "never arrives"}, "delay_ms": 3_600_000},
        {"when": {}, "reply": {"text": "done"}}
    ]});
    let bench = Bench::new(&script);
    // The support config ends in its [subagent] table: nest three deep.
    let config = bench.project.join("taskforce.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("max_depth = 3\n");
    std::fs::write(&config, text).unwrap();
    let mut options = bench.options();
    options.bus_capacity = 1 << 18;
    in_system(async move {
        let rt = taskforce::actors::Runtime::start(options).await.unwrap();
        let mut samples = Vec::new();
        for round in 0..rounds {
            let root = rt.create_session(None, None).await.unwrap();
            let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
            let built = Instant::now();
            rt.prompt_async(&root.id, PromptInput::text("build the tree"))
                .await
                .unwrap();
            // Every session of the tree runs (the leaves sit in their stalled model call).
            while rt.statuses().len() < SESSIONS {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let build_time = built.elapsed();
            // Let the tree settle: the last leaves reach their model call and every write the
            // build queued is on disk (events go out after their write, so a quiet bus means
            // nothing is pending).
            let mut quiet_since = Instant::now();
            while quiet_since.elapsed() < Duration::from_millis(250) {
                match tokio::time::timeout(Duration::from_millis(25), events.next()).await {
                    Ok(Some(_)) => quiet_since = Instant::now(),
                    Ok(None) => break,
                    Err(_) => {}
                }
            }
            let settle_time = built.elapsed();

            let start = Instant::now();
            rt.cancel(&root.id).await.unwrap();
            let told = start.elapsed();
            let mut idle = HashSet::new();
            let mut arrivals: Vec<Duration> = Vec::with_capacity(SESSIONS);
            let mut lagged = false;
            let mut kinds: std::collections::BTreeMap<&'static str, Vec<Duration>> =
                std::collections::BTreeMap::new();
            while idle.len() < SESSIONS {
                match events.next().await {
                    Some(BusItem::Event(e)) => {
                        kinds
                            .entry(e.event.type_name())
                            .or_default()
                            .push(start.elapsed());
                        if let Event::SessionIdle { session_id } = &e.event
                            && idle.insert(session_id.clone())
                        {
                            arrivals.push(start.elapsed());
                        }
                    }
                    Some(BusItem::Lagged(_)) => {
                        lagged = true;
                        break;
                    }
                    None => break,
                }
            }
            // Fall back to the status map when the bus could not tell.
            while !rt.statuses().is_empty() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let all_idle = start.elapsed();
            samples.push(all_idle);
            for (kind, times) in &kinds {
                println!(
                    "  {kind}: {} events, first {:?}, median {:?}, last {:?}",
                    times.len(),
                    times[0],
                    times[times.len() / 2],
                    times[times.len() - 1]
                );
            }
            let at = |q: usize| {
                arrivals
                    .get((arrivals.len() * q / 100).min(arrivals.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or_default()
            };
            let nth = |n: usize| arrivals.get(n - 1).copied().unwrap_or_default();
            println!(
                "  idle: 1,000th at {:?}, 1,100th at {:?}, 1,110th at {:?}",
                nth(1000),
                nth(1100),
                nth(1110)
            );
            println!(
                "round {round}: tree of {SESSIONS} sessions running after {build_time:?}, settled after {settle_time:?}; cancel call returned after {told:?}; all idle after {all_idle:?} ({} idle events{}; 10% idle at {:?}, 50% at {:?}, 90% at {:?})",
                idle.len(),
                if lagged { ", bus lagged" } else { "" },
                at(10),
                at(50),
                at(90),
            );
        }
        let (median, p95, mean) = summary(&mut samples);
        println!(
            "cancel of a {SESSIONS}-session tree until all idle: median {median:?}, p95 {p95:?}, mean {mean:?} over {rounds} rounds (budget 20 ms)"
        );
    });
}
