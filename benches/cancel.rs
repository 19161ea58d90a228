//! Cancel propagation: a session tree 3 levels deep with 10 children per node (root → 10 →
//! 100 → 1,000 sessions, 1,111 in all) whose leaves stall in their model call, cancelled at the
//! root once every session runs. Measures the time from the cancel call until every session is
//! idle (the runtime's status map is empty and the bus has announced 1,111 `session.idle`).
//!
//! `cargo bench --profile dist --bench cancel [-- ROUNDS [LEVELS]] [--detail]` (default 3 rounds, a
//! fresh tree each, 3 levels of children; `-- 3 2` cancels root → 10 → 100). Budget: 20 ms. The
//! bench follows the tree on the bus as a client would, noting only the `session.idle` events;
//! `--detail` also times every event kind, each level and each task call's end (that bookkeeping
//! costs the bench's own CPU inside the measured window).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use support::{Bench, in_system, summary};
use taskforce::actors::PromptInput;
use taskforce::actors::bus::{BusItem, Event, Filter};

const FANOUT: usize = 10;

fn main() {
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let detail = std::env::args().any(|a| a == "--detail");
    let rounds = numbers.first().copied().unwrap_or(3);
    let levels = numbers.get(1).copied().unwrap_or(3).clamp(1, 4);
    let sessions: usize = (0..=levels).map(|l| FANOUT.pow(l as u32)).sum();
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
    text.push_str(&format!("max_depth = {levels}\n"));
    std::fs::write(&config, text).unwrap();
    let mut options = bench.options();
    options.bus_capacity = 1 << 18;
    in_system(async move {
        let rt = taskforce::actors::Runtime::start(options).await.unwrap();
        let mut samples = Vec::new();
        let mut cpu_samples = Vec::new();
        for round in 0..rounds {
            let root = rt.create_session(None, None).await.unwrap();
            let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
            let built = Instant::now();
            rt.prompt_async(&root.id, PromptInput::text("build the tree"))
                .await
                .unwrap();
            // Every session of the tree runs (the leaves sit in their stalled model call).
            while rt.statuses().len() < sessions {
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

            perf_control("enable");
            let cpu_before = cpu_time();
            let start = Instant::now();
            rt.cancel(&root.id).await.unwrap();
            let told = start.elapsed();
            let mut idle = HashSet::with_capacity(sessions);
            let mut idle_at: HashMap<String, Duration> = HashMap::new();
            // (child, parent, when the parent's task call for it ended)
            let mut calls_done: Vec<(String, String, Duration)> = Vec::new();
            let mut arrivals: Vec<Duration> = Vec::with_capacity(sessions);
            let mut lagged = false;
            let mut kinds: BTreeMap<&'static str, Vec<Duration>> =
                std::collections::BTreeMap::new();
            while idle.len() < sessions {
                match events.next().await {
                    Some(BusItem::Event(e)) if !detail => {
                        if let Event::SessionIdle { session_id } = &e.event
                            && idle.insert(session_id.clone())
                        {
                            arrivals.push(start.elapsed());
                        }
                    }
                    Some(BusItem::Event(e)) => {
                        kinds
                            .entry(e.event.type_name())
                            .or_default()
                            .push(start.elapsed());
                        if let Event::SessionIdle { session_id } = &e.event
                            && idle.insert(session_id.clone())
                        {
                            arrivals.push(start.elapsed());
                            idle_at.insert(session_id.to_string(), start.elapsed());
                        }
                        if let Event::PartUpdated { part } = &e.event
                            && let Some(tool) = part.as_tool()
                            && tool.tool == "task"
                            && tool.state.is_finished()
                            && let Some(child) = tool
                                .state
                                .metadata()
                                .and_then(|m| m.get("sessionId"))
                                .and_then(|v| v.as_str())
                        {
                            calls_done.push((
                                child.to_string(),
                                part.session_id.to_string(),
                                start.elapsed(),
                            ));
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
            let cpu = cpu_time().saturating_sub(cpu_before);
            perf_control("disable");
            cpu_samples.push(cpu);
            samples.push(all_idle);
            if detail {
                detailed(&kinds, &calls_done, &idle_at);
            }
            let at = |q: usize| {
                arrivals
                    .get((arrivals.len() * q / 100).min(arrivals.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or_default()
            };
            // Sessions end from the leaves up: when the count reaches each level's total.
            let mut level_ends = Vec::new();
            let mut count = 0;
            for level in (0..=levels).rev() {
                count += FANOUT.pow(level as u32);
                let at = arrivals.get(count - 1).copied().unwrap_or_default();
                level_ends.push(format!("{count} idle at {at:?}"));
            }
            println!("  from the leaves up: {}", level_ends.join(", "));
            println!(
                "round {round}: tree of {sessions} sessions running after {build_time:?}, settled after {settle_time:?}; cancel call returned after {told:?}; all idle after {all_idle:?}, {cpu:?} of CPU ({} idle events{}; 10% idle at {:?}, 50% at {:?}, 90% at {:?})",
                idle.len(),
                if lagged { ", bus lagged" } else { "" },
                at(10),
                at(50),
                at(90),
            );
        }
        let (cpu_median, _, _) = summary(&mut cpu_samples);
        println!("CPU time of the process from the cancel until all idle: median {cpu_median:?}");
        let (median, p95, mean) = summary(&mut samples);
        println!(
            "cancel of a {sessions}-session tree until all idle: median {median:?}, p95 {p95:?}, mean {mean:?} over {rounds} rounds (budget 20 ms)"
        );
    });
}

/// With `--detail`: when each event kind arrived, and where a parent's time goes (from its
/// child's idle to its task call's end, from its last call's end to its own idle).
fn detailed(
    kinds: &BTreeMap<&'static str, Vec<Duration>>,
    calls_done: &[(String, String, Duration)],
    idle_at: &HashMap<String, Duration>,
) {
    for (kind, times) in kinds {
        println!(
            "  {kind}: {} events, first {:?}, median {:?}, last {:?}",
            times.len(),
            times[0],
            times[times.len() / 2],
            times[times.len() - 1]
        );
    }
    // Where a parent's time goes: from its child's idle to its task call's end, and from
    // its last task call's end to its own idle.
    let mut call_lag: Vec<Duration> = Vec::new();
    let mut last_call: HashMap<&str, Duration> = HashMap::new();
    for (child, parent, at) in calls_done {
        if let Some(child_idle) = idle_at.get(child) {
            call_lag.push(at.saturating_sub(*child_idle));
        }
        let last = last_call.entry(parent.as_str()).or_default();
        *last = (*last).max(*at);
    }
    let mut end_lag: Vec<Duration> = last_call
        .iter()
        .filter_map(|(parent, at)| idle_at.get(*parent).map(|i| i.saturating_sub(*at)))
        .collect();
    call_lag.sort();
    end_lag.sort();
    let mid = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
    let max = |v: &[Duration]| v.last().copied().unwrap_or_default();
    println!(
        "  child idle -> parent's call ended: median {:?}, max {:?} ({} calls); last call ended -> parent idle: median {:?}, max {:?}",
        mid(&call_lag),
        max(&call_lag),
        call_lag.len(),
        mid(&end_lag),
        max(&end_lag)
    );
}

/// Tells `perf record --control fifo:CTL,ACK -D -1` to record (`enable`) or stop (`disable`)
/// when `PERF_CTL` and `PERF_ACK` name its fifos, so that a profile holds only the cancels.
fn perf_control(command: &str) {
    use std::io::{Read, Write};
    let (Ok(ctl), Ok(ack)) = (std::env::var("PERF_CTL"), std::env::var("PERF_ACK")) else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(ctl) {
        let _ = writeln!(f, "{command}");
    }
    if let Ok(mut f) = std::fs::File::open(ack) {
        let mut buf = [0u8; 5];
        let _ = f.read(&mut buf);
    }
}

/// CPU time used so far by every thread of this process (from `/proc/self/task/*/schedstat`,
/// nanosecond resolution; zero where it cannot be read).
fn cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}
