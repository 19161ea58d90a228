//! Memory of a long streamed reply: the fake OpenAI server streams one reply of
//! `TF_STREAM_BYTES` bytes (1 MB) in `TF_STREAM_DELTAS` deltas (10,000) to a session of
//! `taskforce serve` while `TF_STREAM_CLIENTS` SSE clients (5) read `GET /event`; reports the
//! server's peak RSS (VmHWM) and its RSS once the reply is over and the clients are idle.
//!
//! `cargo bench --profile dist --bench stream_memory`. The budget is a peak under 100 MB and under
//! 60 MB idle. `TF_STREAM_DELAY_US` waits that long before each delta (0: the reply streams as fast
//! as it can); `TF_STREAM_IN_PROCESS=1` runs the server in the benchmark's process instead.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use support::{Bench, http_prompt, http_session, rollup_of, rss_of, spawn_serve};
use taskforce_server::{Server, ServerOptions};
use taskforce_testkit::fake_openai::{Chunk, FakeOpenAi, Response};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The streamed reply: `deltas` pieces of `bytes / deltas` characters each.
fn reply(bytes: u64, deltas: u64, delay: Duration) -> Response {
    let size = usize::try_from((bytes / deltas).max(1)).unwrap();
    let piece: String = "abcdefghij ".chars().cycle().take(size).collect();
    let mut chunks = vec![Chunk::role()];
    for _ in 0..deltas {
        if !delay.is_zero() {
            chunks.push(Chunk::Sleep(delay));
        }
        chunks.push(Chunk::text(&piece));
    }
    chunks.push(Chunk::finish("stop"));
    chunks.push(Chunk::usage(10, deltas));
    chunks.push(Chunk::done());
    Response::Stream(chunks)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn main() {
    let bytes = env_or("TF_STREAM_BYTES", 1_000_000);
    let deltas = env_or("TF_STREAM_DELTAS", 10_000).max(1);
    let clients = env_or("TF_STREAM_CLIENTS", 5);
    let delay = Duration::from_micros(env_or("TF_STREAM_DELAY_US", 0));
    // `TF_STREAM_IN_PROCESS=1`: the server in this process (its RSS then counts the fake model
    // server and the clients too); otherwise the real `taskforce serve` binary.
    let in_process = std::env::var("TF_STREAM_IN_PROCESS").is_ok_and(|v| v == "1");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let fake = FakeOpenAi::start(move |_| reply(bytes, deltas, delay))
            .await
            .unwrap();
        let bench = Bench::configured(&format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-bench\"\n",
            fake.base_url()
        ));
        let mut child = None;
        let (base, pid) = if in_process {
            let rt = bench.runtime_dedicated();
            let server = Server::bind(
                rt,
                &ServerOptions {
                    port: 0,
                    ..ServerOptions::default()
                },
            )
            .await
            .unwrap();
            let base = format!("http://{}", server.local_addr().unwrap());
            tokio::spawn(server.run_until(std::future::pending()));
            (base, std::process::id())
        } else {
            let (serve, base) = spawn_serve(&bench);
            let pid = serve.id();
            child = Some(serve);
            (base, pid)
        };
        let http = reqwest::Client::new();
        let session_id = http_session(&http, &base).await;
        let baseline = rss_of(pid, "VmRSS:");

        let idle = format!("{{\"type\":\"session.idle\",\"properties\":{{\"sessionID\":\"{session_id}\"}}}}");
        let mut readers = Vec::new();
        for _ in 0..clients {
            let response = http.get(format!("{base}/event")).send().await.unwrap();
            let idle = idle.clone();
            readers.push(tokio::spawn(async move {
                let mut stream = response.bytes_stream();
                // Only the unread tail is kept: a frame can span chunks.
                let mut tail: Vec<u8> = Vec::new();
                let (mut frames, mut received) = (0u64, 0u64);
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.unwrap();
                    received += chunk.len() as u64;
                    tail.extend_from_slice(&chunk);
                    let mut done = false;
                    while let Some(end) = find(&tail, b"\n\n") {
                        frames += 1;
                        done |= find(&tail[..end], idle.as_bytes()).is_some();
                        tail.drain(..end + 2);
                    }
                    if done {
                        break;
                    }
                }
                (frames, received)
            }));
        }

        let started = Instant::now();
        http_prompt(&http, &base, &session_id, "write a long answer").await;
        let mut frames = 0;
        let mut received = 0;
        for reader in readers {
            let (f, r) = tokio::time::timeout(Duration::from_secs(600), reader)
                .await
                .expect("every client reads the reply to its end")
                .unwrap();
            frames += f;
            received += r;
        }
        let elapsed = started.elapsed();
        let peak = rss_of(pid, "VmHWM:");
        // Idle: the reply is over and every client has read it.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle_rss = rss_of(pid, "VmRSS:");
        let lazy = rollup_of(pid, "LazyFree:");
        println!(
            "stream_memory ({}): {bytes} bytes in {deltas} deltas, {clients} SSE clients: {:.2?}, {} frames and {:.1} MiB per client",
            if in_process { "server in this process" } else { "taskforce serve" },
            elapsed,
            frames / clients.max(1),
            received as f64 / clients.max(1) as f64 / 1_048_576.0
        );
        println!(
            "stream_memory: RSS before the reply {baseline:.1} MiB, peak {peak:.1} MiB, idle after it {idle_rss:.1} MiB of which {lazy:.1} MiB freed lazily (budget: peak < 100, idle < 60)"
        );
        if let Some(mut serve) = child {
            let _ = serve.kill();
            let _ = serve.wait();
        }
        drop(fake);
    });
}
