//! SSE fan-out: 100 clients on `GET /event` over real HTTP while text deltas are published at a
//! steady rate; reports delivered events/s and the delay from publish to client (p50/p99/max).
//!
//! `cargo bench --profile dist --bench sse`. Rates are events published per second; each goes to
//! all 100 clients, so 200/s is 20,000 deliveries/s in total. `TF_SSE_RATES=200,1000` picks the
//! rates.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use support::Bench;
use taskforce::actors::bus::Event;
use taskforce::agents::id::{MessageId, PartId, SessionId};
use taskforce_server::{Server, ServerOptions};

const CLIENTS: usize = 100;
const SECONDS: u64 = 5;

fn main() {
    let bench = Bench::new(&serde_json::json!({"rules": []}));
    let rates: Vec<u64> = std::env::var("TF_SSE_RATES")
        .unwrap_or_else(|_| "200,500,1000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rt = runtime.block_on(async { bench.runtime_dedicated() });
    runtime.block_on(async move {
        let server = Server::bind(
            rt.clone(),
            &ServerOptions {
                port: 0,
                ..ServerOptions::default()
            },
        )
        .await
        .unwrap();
        let url = format!("http://{}/event", server.local_addr().unwrap());
        tokio::spawn(server.run_until(std::future::pending()));
        println!("sse: {CLIENTS} clients, {SECONDS} s per rate");
        for rate in rates {
            run(&rt, &url, rate).await;
        }
    });
}

async fn run(rt: &taskforce::actors::Runtime, url: &str, rate: u64) {
    let origin = Instant::now();
    let total = rate * SECONDS;
    let client = reqwest::Client::new();
    let mut readers = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(CLIENTS);
    for _ in 0..CLIENTS {
        let response = client.get(url).send().await.unwrap();
        let ready = ready_tx.clone();
        readers.push(tokio::spawn(async move {
            let mut stream = response.bytes_stream();
            let mut buffer: Vec<u8> = Vec::new();
            let mut delays = Vec::with_capacity(usize::try_from(total).unwrap());
            let mut announced = false;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.unwrap();
                buffer.extend_from_slice(&chunk);
                while let Some(end) = find(&buffer, b"\n\n") {
                    let frame: Vec<u8> = buffer.drain(..end + 2).collect();
                    if !announced {
                        announced = true;
                        let _ = ready.send(()).await;
                    }
                    if let Some(sent) = stamp(&frame) {
                        let now = origin.elapsed().as_micros() as u64;
                        delays.push(now.saturating_sub(sent));
                        if delays.len() as u64 == total {
                            return delays;
                        }
                    }
                }
            }
            delays
        }));
    }
    drop(ready_tx);
    for _ in 0..CLIENTS {
        ready_rx.recv().await.unwrap();
    }

    let session = SessionId::new();
    let message = MessageId::new();
    let part = PartId::new();
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    for _ in 0..total {
        tick.tick().await;
        let sent = origin.elapsed().as_micros() as u64;
        rt.publish(Event::PartDelta {
            session_id: session.clone(),
            message_id: message.clone(),
            part_id: part.clone(),
            field: "text".into(),
            delta: sent.to_string(),
        });
    }
    let mut all = Vec::with_capacity(usize::try_from(total).unwrap() * CLIENTS);
    for r in readers {
        all.extend(
            tokio::time::timeout(Duration::from_secs(30), r)
                .await
                .expect("a client missed events")
                .unwrap(),
        );
    }
    let elapsed = started.elapsed();
    all.sort_unstable();
    let pct = |p: usize| Duration::from_micros(all[(all.len() * p / 100).min(all.len() - 1)]);
    println!(
        "rate {rate:>5}/s published = {:>7} deliveries/s: delivered {:>7}/s, delay p50 {:>8.2?} p99 {:>8.2?} max {:>8.2?}",
        rate * CLIENTS as u64,
        (all.len() as f64 / elapsed.as_secs_f64()) as u64,
        pct(50),
        pct(99),
        Duration::from_micros(*all.last().unwrap()),
    );
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The publish time carried in the frame's `delta`.
fn stamp(frame: &[u8]) -> Option<u64> {
    let key = b"\"delta\":\"";
    let at = find(frame, key)? + key.len();
    let end = frame[at..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&frame[at..at + end]).ok()?.parse().ok()
}
