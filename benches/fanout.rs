//! Fan-out: one prompt whose model calls the task tool 1,000 times in one step; every child
//! makes one tool call (a real `read`) and answers.
//!
//! `cargo bench --profile dist --bench fanout [-- N]`. Prints the wall time, the CPU time the
//! process used meanwhile (all threads, user and system), the process's peak RSS and what the
//! fan-out added to it per child, how long reading the whole tree afterwards takes, the CPU
//! time of each kind of thread, what the store committed and how long the sessions waited for
//! it (and, with `TF_CHILD_MS`, how much of the time after the children's model wait its writer
//! spent committing), when the children reached each point of their run, when the parent's
//! steps began and ended, and when its task calls ended.
//! `TF_CHILD_MS=200` makes each child's first model call take that long, so that every child
//! is alive at once; the wall time beyond it is the runtime's own overhead. With
//! `TF_PERF_CTL=<fifo>` it writes `enable` and `disable` to that fifo around the prompt, so that
//! `perf record --control=fifo:<fifo> -D -1` profiles the fan-out alone; under
//! `valgrind --tool=callgrind --instr-atstart=no`, a loop that reads the fifo and runs
//! `callgrind_control -i on` (or `off`) for each word counts the fan-out's instructions alone,
//! a figure that varies by well under 1 % between runs where the wall time varies by 10 %
//! (compare builds by instructions per child at 300 children). `TF_WARMUP=1` runs one
//! fan-out first, unmeasured, so that the figures are those of a runtime that has run one before.
//! `TF_COMMITS=1` (with `TF_CHILD_MS`) lists every commit of the finish: when it began after the
//! model wait, how long it took and its rows (many commits of a few rows are touches written
//! on their own).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Instant;

use serde_json::json;
use support::store_trace::StoreTrace;
use support::{
    Bench, cpu_by_thread, cpu_since, cpu_split_ms, in_system, peak_rss_mib, rss_mib,
    switches_by_thread, switches_since,
};
use taskforce::actors::PromptInput;
use taskforce::agents::model::{Message, ToolState};

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let child_ms: u64 = std::env::var("TF_CHILD_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let calls: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"name": "task", "input": {"description": format!("child {i}"), "prompt": "read the notes", "subagent_type": "general"}}))
        .collect();
    let script = json!({"rules": [
        {"when": {"agent": "build", "last_role": "user"}, "reply": {"tool_calls": calls}},
        {"when": {"agent": "build", "last_role": "tool"}, "reply": {"text": "all children reported"}},
        {"when": {"agent": "general", "last_role": "user"}, "reply": {"tool_calls": [{"name": "read", "input": {"filePath": "notes.txt"}}]}, "delay_ms": child_ms},
        {"when": {"agent": "general", "last_role": "tool"}, "reply": {"text": "the notes say hello"}}
    ]});
    let bench = Bench::new(&script);
    let store_trace = StoreTrace::install();
    in_system(async move {
        let rt = bench.runtime().await;
        if std::env::var("TF_WARMUP").is_ok_and(|v| v == "1") {
            // A runtime that has run a fan-out before: its heap has grown already and its
            // store holds the first fan-out's rows.
            let warm = rt.create_session(None, None).await.unwrap();
            rt.prompt(&warm.id, PromptInput::text("fan out"))
                .await
                .unwrap();
        }
        let s = rt.create_session(None, None).await.unwrap();
        let before = rss_mib().unwrap_or(f64::NAN);
        let switches_before = switches_by_thread();
        let cpu_before = cpu_by_thread();
        let (user_before, system_before) = cpu_split_ms().unwrap_or((f64::NAN, f64::NAN));
        store_trace.reset();
        let perf = |what: &str| {
            if let Ok(path) = std::env::var("TF_PERF_CTL") {
                let _ = std::fs::write(path, format!("{what}\n"));
            }
        };
        perf("enable");
        let start = Instant::now();
        let started_ms = taskforce::agents::id::now_ms();
        let answer = rt
            .prompt(&s.id, PromptInput::text("fan out"))
            .await
            .unwrap();
        let wall = start.elapsed();
        perf("disable");
        let (user, system) = cpu_split_ms().unwrap_or((f64::NAN, f64::NAN));
        let (user, system) = (user - user_before, system - system_before);
        let cpu = user + system;
        let store = store_trace.summary(n);
        let (switches, switched) = switches_since(&switches_before);
        let cpu_threads = cpu_since(&cpu_before);
        let children = rt.children(&s.id).await.unwrap().len();
        let tree_start = Instant::now();
        let tree = rt.tree(&s.id).await.unwrap();
        let tree_read = tree_start.elapsed();
        assert_eq!(children, n, "every child ran");
        assert!(answer.parts.iter().any(|p| p.as_text().is_some()));
        let peak = peak_rss_mib().unwrap_or(f64::NAN);
        println!(
            "fan-out of {n} children ({child_ms} ms each): wall {wall:?} (overhead {:?}), CPU {cpu:.0} ms ({:.0} µs per child; user {user:.0} ms, system {system:.0} ms), peak RSS {peak:.1} MiB ({before:.1} MiB before it: {:.0} KiB per child), {} model turns in the tree",
            wall.saturating_sub(std::time::Duration::from_millis(child_ms)),
            cpu * 1000.0 / n as f64,
            (peak - before) * 1024.0 / n as f64,
            tree.total_usage.turns
        );
        println!(
            "the tree of {} sessions read in {tree_read:?}",
            tree.children.len() + 1
        );
        println!(
            "context switches: {switched} ({:.1} per child; by thread: {switches})",
            switched as f64 / n as f64
        );
        println!("CPU by thread: {cpu_threads}");
        println!("{store}");
        if child_ms > 0 {
            // After the children's model wait, the finish: how much of it the store's writer
            // spent committing.
            let from = start + std::time::Duration::from_millis(child_ms);
            println!(
                "after the children's model wait: {}",
                store_trace.window(from, start + wall)
            );
            // `TF_COMMITS=1`: each commit of the finish (ms after the model wait, its length, its rows).
            if std::env::var("TF_COMMITS").is_ok_and(|v| v == "1") {
                println!(
                    "commits after the model wait: {}",
                    store_trace.list(from, start + wall)
                );
            }
        }
        // When, after the prompt, the children reached each point of their run (from the times
        // stored on their sessions and messages): a late first model call means a slow start,
        // a late end after it a slow finish.
        let mut points: [Vec<u64>; 4] = Default::default();
        for child in &tree.children {
            points[0].push(child.info.time.created);
            let messages = rt.messages(&child.info.id).await.unwrap();
            let answers: Vec<_> = messages
                .iter()
                .filter_map(|m| match &*m.info {
                    Message::Assistant(a) => Some(&a.time),
                    Message::User(_) => None,
                })
                .collect();
            if let (Some(first), Some(last)) = (answers.first(), answers.last()) {
                points[1].push(first.created);
                points[2].push(first.completed.unwrap_or(first.created));
                points[3].push(last.completed.unwrap_or(last.created));
            }
        }
        let names = ["created", "first model call", "its answer", "last answer"];
        let after = |t: u64| t.saturating_sub(started_ms);
        let line: Vec<String> = names
            .iter()
            .zip(points)
            .map(|(name, times)| {
                let spread = first_median_last(times.into_iter().map(after).collect());
                format!("{name} {spread} ms")
            })
            .collect();
        println!(
            "children's timeline after the prompt (first/median/last): {}",
            line.join(", ")
        );
        // The parent's own steps: when its fan-out step ended (every call answered) and when
        // its last step began and ended; and when its task calls started and ended.
        let parent = rt.messages(&s.id).await.unwrap();
        let steps: Vec<String> = parent
            .iter()
            .filter_map(|m| match &*m.info {
                Message::Assistant(a) => Some(format!(
                    "step {}–{} ms",
                    after(a.time.created),
                    a.time.completed.map_or(0, after)
                )),
                Message::User(_) => None,
            })
            .collect();
        println!("the parent's steps after the prompt: {}", steps.join(", "));
        let (starts, ends): (Vec<u64>, Vec<u64>) = parent
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match &p.as_tool()?.state {
                ToolState::Completed(c) => Some((after(c.time.start), after(c.time.end))),
                _ => None,
            })
            .unzip();
        println!(
            "the parent's task calls started after the prompt (first/median/last): {} ms, ended {} ms",
            first_median_last(starts),
            first_median_last(ends)
        );
    });
}

/// `times` as `first/median/last` (0 for none).
fn first_median_last(mut times: Vec<u64>) -> String {
    times.sort_unstable();
    let at = |q: usize| {
        times
            .get(times.len().saturating_sub(1) * q / 100)
            .copied()
            .unwrap_or(0)
    };
    format!("{}/{}/{}", at(0), at(50), at(100))
}
