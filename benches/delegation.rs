//! Delegation overhead: one task call → a child session → its result, with SQLite on.
//!
//! `cargo bench --profile dist --bench delegation`. Prints the median, p95 and mean of a full
//! delegated prompt (three model calls, two sessions) and of a plain prompt (one model call) for
//! scale: first through the runtime's API in this process, then over HTTP to `taskforce serve`
//! (the `dist` binary, `POST /session/:id/message` answered with the whole reply).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{Bench, http_prompt, http_session, in_system, spawn_serve, summary};
use taskforce::actors::PromptInput;

const ROUNDS: usize = 300;

fn main() {
    let script = json!({"rules": [
        {"when": {"agent": "build", "last_role": "user", "contains": "delegate"},
         "reply": {"tool_calls": [{"name": "task", "input": {"description": "d", "prompt": "p", "subagent_type": "general"}}]}},
        {"when": {"agent": "build", "last_role": "tool"}, "reply": {"text": "done"}},
        {"when": {"agent": "general"}, "reply": {"text": "child result"}},
        {"when": {"agent": "build"}, "reply": {"text": "plain answer"}}
    ]});
    let bench = Bench::new(&script);
    // The server has a project and data directory of its own (a data directory has one runtime).
    let served = Bench::new(&script);
    let (mut serve, base) = spawn_serve(&served);
    in_system(async move {
        let rt = bench.runtime().await;
        for (label, text) in [("plain prompt", "answer"), ("delegated prompt", "delegate")] {
            // Warm up the caches, the arbiters and the database.
            for _ in 0..20 {
                let s = rt.create_session(None, Some("bench".into())).await.unwrap();
                rt.prompt(&s.id, PromptInput::text(text)).await.unwrap();
            }
            let mut samples: Vec<Duration> = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                let s = rt.create_session(None, Some("bench".into())).await.unwrap();
                let start = Instant::now();
                rt.prompt(&s.id, PromptInput::text(text)).await.unwrap();
                samples.push(start.elapsed());
            }
            let (median, p95, mean) = summary(&mut samples);
            println!(
                "{label:>17}: median {median:?}  p95 {p95:?}  mean {mean:?}  ({ROUNDS} rounds)"
            );
        }
        let http = reqwest::Client::new();
        for (label, text) in [("HTTP plain", "answer"), ("HTTP delegated", "delegate")] {
            let mut samples: Vec<Duration> = Vec::with_capacity(ROUNDS);
            for round in 0..20 + ROUNDS {
                let id = http_session(&http, &base).await;
                let start = Instant::now();
                http_prompt(&http, &base, &id, text).await;
                // The first 20 rounds warm up the server.
                if round >= 20 {
                    samples.push(start.elapsed());
                }
            }
            let (median, p95, mean) = summary(&mut samples);
            println!(
                "{label:>17}: median {median:?}  p95 {p95:?}  mean {mean:?}  ({ROUNDS} rounds, taskforce serve)"
            );
        }
    });
    let _ = serve.kill();
    let _ = serve.wait();
}
