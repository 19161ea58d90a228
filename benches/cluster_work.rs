//! A cluster's work: runtimes in this process sharing one PostgreSQL database
//! (`TASKFORCE_TEST_POSTGRES_URL`) and one NATS (`TASKFORCE_TEST_NATS_URL`); skipped, saying
//! so, when either is unset.
//!
//! `cargo bench --profile dist --bench cluster_work [-- N]`. Prints:
//! - a fan-out of N children (default 1,000; `TF_CHILD_MS`, default 200, per child) on one node
//!   and on three nodes (each with room for a third of them, so two thirds run elsewhere): wall
//!   time, and the time beyond the children's own;
//! - the delegation overhead across nodes: a delegated prompt whose child runs at home, then one
//!   whose child runs on another node (the calling node's one running slot held by a child that
//!   never ends), median / p95 / mean of each and the difference of the medians.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{Bench, in_system, summary};
use taskforce::actors::{PromptInput, Runtime};
use taskforce_testkit::nats::TestNats;
use taskforce_testkit::postgres::TestDatabase;

const ROUNDS: usize = 100;

/// A node of the cluster of `nats` on `db`, with room for `total` running children.
fn node(
    script: &std::path::Path,
    nats: &TestNats,
    db: &TestDatabase,
    name: &str,
    total: usize,
) -> Bench {
    Bench::configured(&format!(
        "model = \"scripted/bench\"\n[provider.scripted]\ntype = \"scripted\"\nscript = \"{}\"\n[subagent]\nmax_concurrent = 100000\nmax_total = {total}\nmax_per_session = 100000\n[store]\nurl = \"{}\"\n{}",
        script.display(),
        db.url(),
        nats.cluster_toml(name, "10s"),
    ))
}

async fn start(bench: &Bench) -> Runtime {
    let mut options = bench.options();
    options.cluster = true;
    Runtime::start(options).await.expect("a node starts")
}

/// One fan-out of `n` children on the nodes of `benches` (the first calls); its wall time.
async fn fan_out(benches: &[Bench], n: usize) -> Duration {
    let mut nodes = Vec::new();
    for bench in benches {
        nodes.push(start(bench).await);
    }
    let s = nodes[0].create_session(None, None).await.unwrap();
    let started = Instant::now();
    nodes[0]
        .prompt(&s.id, PromptInput::text("fan out"))
        .await
        .unwrap();
    let wall = started.elapsed();
    assert_eq!(nodes[0].children(&s.id).await.unwrap().len(), n);
    for node in nodes {
        node.stop(Duration::from_secs(5)).await;
    }
    wall
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let child_ms: u64 = std::env::var("TF_CHILD_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(200);
    let Some(nats) = TestNats::fresh("bench_work") else {
        return;
    };
    let calls: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"name": "task", "input": {"description": format!("child {i}"), "prompt": "answer", "subagent_type": "general"}}))
        .collect();
    let script = json!({"rules": [
        {"when": {"agent": "build", "last_role": "user", "contains": "fan out"}, "reply": {"tool_calls": calls}},
        {"when": {"agent": "build", "last_role": "user", "contains": "hold"},
         "reply": {"tool_calls": [{"name": "task", "input": {"description": "hold", "prompt": "hold the slot", "subagent_type": "general"}}]}},
        {"when": {"agent": "build", "last_role": "user", "contains": "delegate"},
         "reply": {"tool_calls": [{"name": "task", "input": {"description": "d", "prompt": "quick", "subagent_type": "general"}}]}},
        {"when": {"agent": "build", "last_role": "tool"}, "reply": {"text": "done"}},
        {"when": {"agent": "general", "contains": "hold the slot"}, "reply": {"text": "never"}, "delay_ms": 3_600_000},
        {"when": {"agent": "general", "contains": "quick"}, "reply": {"text": "child result"}},
        {"when": {"agent": "general"}, "reply": {"text": "child answer"}, "delay_ms": child_ms}
    ]});
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    in_system(async move {
        let Some(db) = TestDatabase::create("bench_work").await else {
            return;
        };
        let one = [node(&script_path, &nats, &db, "solo", n)];
        let wall = fan_out(&one, n).await;
        println!(
            "fan-out of {n} children ({child_ms} ms each) on 1 node: wall {wall:?} (overhead {:?})",
            wall.saturating_sub(Duration::from_millis(child_ms))
        );
        let third = n.div_ceil(3);
        let three = [
            node(&script_path, &nats, &db, "n1", third),
            node(&script_path, &nats, &db, "n2", third),
            node(&script_path, &nats, &db, "n3", third),
        ];
        let wall = fan_out(&three, n).await;
        println!(
            "fan-out of {n} children ({child_ms} ms each) on 3 nodes ({third} running each): wall {wall:?} (overhead {:?})",
            wall.saturating_sub(Duration::from_millis(child_ms))
        );

        // Delegation: node A has one running slot, node B plenty.
        let (a_bench, b_bench) = (
            node(&script_path, &nats, &db, "a", 1),
            node(&script_path, &nats, &db, "b", 64),
        );
        let (a, b) = (start(&a_bench).await, start(&b_bench).await);
        let mut medians = Vec::new();
        for label in ["child at home", "child on another node"] {
            if label == "child on another node" {
                // A child that never ends holds A's one slot: from now on A's children run on B.
                let holder = a.create_session(None, None).await.unwrap();
                // Its answer never comes: nobody waits for it.
                drop(
                    a.prompt_queued(&holder.id, PromptInput::text("hold"))
                        .await
                        .unwrap(),
                );
                while a.children(&holder.id).await.unwrap().is_empty() {
                    tokio::task::yield_now().await;
                }
            }
            for _ in 0..10 {
                let s = a.create_session(None, None).await.unwrap();
                a.prompt(&s.id, PromptInput::text("delegate"))
                    .await
                    .unwrap();
            }
            let mut samples = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                let s = a.create_session(None, None).await.unwrap();
                let started = Instant::now();
                a.prompt(&s.id, PromptInput::text("delegate"))
                    .await
                    .unwrap();
                samples.push(started.elapsed());
            }
            let (median, p95, mean) = summary(&mut samples);
            println!(
                "delegated prompt, {label}: median {median:?}, p95 {p95:?}, mean {mean:?} ({ROUNDS} rounds)"
            );
            medians.push(median);
        }
        println!(
            "cross-node delegation overhead over the local path (medians): {:?}",
            medians[1].saturating_sub(medians[0])
        );
        a.stop(Duration::from_secs(5)).await;
        b.stop(Duration::from_secs(5)).await;
    });
}
