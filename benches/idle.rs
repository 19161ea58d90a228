//! Idle memory of `taskforce serve`: the `dist` binary on a throwaway project (the scripted
//! model of the other benchmarks), measured once it answers HTTP and again after one prompt.
//!
//! `cargo bench --profile dist --bench idle`. Prints the server's RSS (`VmRSS`), its peak
//! (`VmHWM`), how much of it is anonymous memory (heap, stacks) rather than the mapped binary and
//! libraries, and its thread count. The budget is 16 MB idle.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use support::{Bench, http_prompt, http_session, rollup_of, rss_of, spawn_serve};

/// The thread count of process `pid`.
fn threads_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Threads:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn report(label: &str, pid: u32) {
    println!(
        "idle serve ({label}): RSS {:.1} MiB (peak {:.1} MiB), anonymous {:.1} MiB, file-backed {:.1} MiB, {} threads (budget: RSS <= 16 MB)",
        rss_of(pid, "VmRSS:"),
        rss_of(pid, "VmHWM:"),
        rollup_of(pid, "Anonymous:"),
        rollup_of(pid, "Rss:") - rollup_of(pid, "Anonymous:"),
        threads_of(pid),
    );
}

fn main() {
    let bench = Bench::new(&serde_json::json!({"rules": [
        {"when": {}, "reply": {"text": "an answer"}}
    ]}));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut serve, base) = spawn_serve(&bench);
    let pid = serve.id();
    runtime.block_on(async move {
        let http = reqwest::Client::new();
        let listed = http.get(format!("{base}/session")).send().await.unwrap();
        assert!(listed.status().is_success(), "{}", listed.status());
        // Whatever the start left to settle (the checkpoint task's first round, lazy frees).
        tokio::time::sleep(Duration::from_secs(2)).await;
        report("started, answering", pid);

        let id = http_session(&http, &base).await;
        http_prompt(&http, &base, &id, "hello").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        report("after one prompt", pid);
    });
    let _ = serve.kill();
    let _ = serve.wait();
}
