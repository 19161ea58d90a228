//! The stores' write path, alone (no runtime around it): SQLite's, and PostgreSQL's when
//! `TASKFORCE_TEST_POSTGRES_URL` names a server (in a schema of its own, dropped at the end).
//!
//! - `queued`: the final state of 1,111 sessions (the cancelled tree of `benches/cancel.rs`):
//!   per session its assistant message, its task tool part (failed, with input and metadata)
//!   and a step-finish part, 3,333 upserts queued with `queue_many` (most update rows that
//!   exist), then one read that waits for them all. Wall time from the first queue to the end
//!   of the read, and the CPU the process used meanwhile (all threads, from
//!   `/proc/self/task/*/schedstat`; `sqlite` = the connections' worker threads and the upsert thread).
//! - `awaited`: 64 tasks each making 50 `put_many` calls one after the other, of a part and
//!   every fifth time also its message (group commit under load): the latency of one call,
//!   wall time and CPU for the 3,840 upserts.
//! - `direct`: 2,000 awaited `put_part` calls one after the other (the path without a queue).
//!
//! `cargo bench --profile dist --bench store [-- ROUNDS]` (default 7 rounds; medians over the
//! rounds). On PostgreSQL the time the server spends is in neither CPU figure.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::summary;
use taskforce::actors::store::{PostgresStore, SqliteStore, Store};
use taskforce::agents::model::{
    AssistantError, AssistantMessage, JsonObject, Message, MessagePath, ModelRef, Part, PartKind,
    StepFinishPart, TextPart, Tokens, ToolPart, ToolStateRunning, UserMessage,
};
use taskforce::agents::model::{Session, ToolState};
use taskforce_testkit::postgres::TestDatabase;

const SESSIONS: usize = 1_111;
const TASKS: usize = 64;
const PER_TASK: usize = 50;
const DIRECT: usize = 2_000;

/// CPU time used so far by each live thread of the process, from
/// `/proc/self/task/*/schedstat` (nanosecond resolution, unlike `/proc/self/stat`).
#[derive(Debug, Clone, Default)]
struct Threads(HashMap<String, (String, Duration)>);

/// CPU used over a stretch of time: in total, by the SQLite worker threads (one per
/// connection), by the busiest of them (the writer's, when writing), and by the runtime's
/// worker threads (where the store's writer task runs; the callers run on the main thread).
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    total: Duration,
    sqlite: Duration,
    busiest: Duration,
    runtime: Duration,
}

impl Threads {
    fn now() -> Threads {
        let mut threads = HashMap::new();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Threads(threads);
        };
        for task in tasks.flatten() {
            let path = task.path();
            let Ok(stat) = std::fs::read_to_string(path.join("schedstat")) else {
                continue;
            };
            let Some(ns) = stat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            threads.insert(
                task.file_name().to_string_lossy().into_owned(),
                (name, Duration::from_nanos(ns)),
            );
        }
        Threads(threads)
    }

    fn since(&self, before: &Threads) -> Cpu {
        let mut cpu = Cpu::default();
        for (tid, (name, now)) in &self.0 {
            let then = before.0.get(tid).map_or(Duration::ZERO, |(_, t)| *t);
            let used = now.saturating_sub(then);
            cpu.total += used;
            // sqlx's connection workers, and the SQLite store's upsert thread (its name cut to
            // the kernel's 15 characters).
            if name.starts_with("sqlx-sqlite") || name.starts_with("taskforce-sqlit") {
                cpu.sqlite += used;
                cpu.busiest = cpu.busiest.max(used);
            } else if name.starts_with("tokio") {
                cpu.runtime += used;
            }
        }
        cpu
    }
}

fn model() -> ModelRef {
    ModelRef::new("anthropic", "claude-sonnet-4-5")
}

fn object(value: serde_json::Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

/// One session of the tree as the runtime stores it while it runs: the session, the user's
/// prompt, the assistant's reply in progress, a running task tool part and some text.
struct Conversation {
    session: Session,
    user: Message,
    assistant: AssistantMessage,
    tool: Part,
    text: Part,
}

impl Conversation {
    fn new(root: &Session, i: usize) -> Conversation {
        let session = Session::child_of(root, format!("part {i} (@general subagent)"), 1_000);
        let user: Message = UserMessage::new(session.id.clone(), "general", model(), 1_001).into();
        let path = MessagePath {
            cwd: PathBuf::from("/home/dev/src/project"),
            root: PathBuf::from("/home/dev/src/project"),
        };
        let assistant = AssistantMessage::new(
            session.id.clone(),
            user.id().clone(),
            "general",
            &model(),
            path,
            1_002,
        );
        let input = object(json!({
            "description": format!("part {i} of the work"),
            "prompt": "Split the work into independent pieces, delegate each piece to a \
                       subagent, wait for all of them, then summarize what each one found, \
                       with the files it touched and anything that still needs a decision. \
                       Keep the summary under twenty lines.",
            "subagent_type": "general",
        }));
        let mut running = ToolStateRunning::new(input, 1_010);
        running.title = Some(format!("part {i} of the work"));
        running.metadata = Some(
            object(json!({
                "sessionId": format!("ses_{i:026}"),
                "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
                "summary": (0..8).map(|k| json!({
                    "id": format!("prt_{i:010}{k:016}"),
                    "tool": if k % 2 == 0 { "read" } else { "grep" },
                    "state": {"status": "completed", "title": format!("src/module_{k}/mod.rs")},
                })).collect::<Vec<_>>(),
            }))
            .into(),
        );
        let tool = Part::new(
            session.id.clone(),
            assistant.id.clone(),
            ToolPart {
                state: running.into(),
                ..ToolPart::pending(format!("toolu_{i:024}"), "task")
            },
        );
        let text = Part::new(
            session.id.clone(),
            assistant.id.clone(),
            TextPart::new(
                "I'll split this into independent pieces and hand each one to a subagent; \
                 once they are all back I will put their findings together. "
                    .repeat(3),
            ),
        );
        Conversation {
            session,
            user,
            assistant,
            tool,
            text,
        }
    }

    /// The end of a cancelled run: the reply aborted, the tool call interrupted, the step's
    /// accounting.
    fn cancelled(&self) -> (Message, Part, Part) {
        let mut assistant = self.assistant.clone();
        assistant.error = Some(AssistantError::aborted("The operation was aborted."));
        assistant.time.completed = Some(2_000);
        assistant.finish = Some("tool-calls".into());
        let tokens = Tokens {
            input: 12_345,
            output: 678,
            reasoning: 90,
            ..Tokens::default()
        };
        assistant.tokens = tokens;
        assistant.cost = 0.0421;
        let mut tool = self.tool.clone();
        if let Some(t) = tool.as_tool_mut()
            && let ToolState::Running(running) = t.state.clone()
        {
            t.state = running.fail("Tool execution was interrupted", 2_000).into();
        }
        let step = Part::new(
            self.session.id.clone(),
            self.assistant.id.clone(),
            StepFinishPart::new("tool-calls", 0.0421, tokens),
        );
        (assistant.into(), tool, step)
    }
}

/// A store holding a root and `SESSIONS` conversations under it, written and committed.
async fn tree(store: &Arc<dyn Store>) -> Vec<Conversation> {
    let root = Session::new("proj", "/home/dev/src/project", "build the tree", 1_000);
    store.put_session(&root).await.unwrap();
    let conversations: Vec<Conversation> =
        (0..SESSIONS).map(|i| Conversation::new(&root, i)).collect();
    for c in &conversations {
        let assistant: Message = c.assistant.clone().into();
        store
            .put_many(&[&c.session], &[&c.user, &assistant], &[&c.tool, &c.text])
            .await
            .unwrap();
    }
    conversations
}

/// Waits for the store's periodic checkpoint to fold the set-up's writes into the database, so
/// that the measured stretch does not pay for them.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1_100)).await;
}

/// (a) The final states of the tree queued without waiting, then one read that waits for them.
async fn queued(store: &Arc<dyn Store>) -> (Duration, Cpu) {
    let conversations = tree(store).await;
    settle().await;
    let ends: Vec<(Message, Part, Part)> = conversations.iter().map(|c| c.cancelled()).collect();
    let last = &conversations[SESSIONS - 1].session.id;
    let cpu = Threads::now();
    let start = Instant::now();
    for (message, tool, step) in ends {
        store.queue_many(
            Vec::new(),
            vec![message.into()],
            vec![Arc::new(tool), Arc::new(step)],
        );
    }
    let messages = store.messages(last).await.unwrap();
    let wall = start.elapsed();
    let cpu = Threads::now().since(&cpu);
    assert_eq!(messages[1].parts.len(), 3);
    (wall, cpu)
}

/// (b) Many tasks storing one part at a time, each waiting for its commit.
async fn awaited(store: &Arc<dyn Store>) -> (Duration, Duration, Cpu) {
    let conversations = tree(store).await;
    settle().await;
    let store = store.clone();
    let cpu = Threads::now();
    let start = Instant::now();
    let tasks: Vec<_> = conversations
        .iter()
        .take(TASKS)
        .map(|c| {
            let store = store.clone();
            let (session, mut assistant) = (c.session.id.clone(), c.assistant.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(PER_TASK);
                let mut part = Part::new(session, assistant.id.clone(), TextPart::new(""));
                for i in 0..PER_TASK {
                    if let PartKind::Text(t) = &mut part.kind {
                        t.text = format!("streamed so far: {}", "token ".repeat(20 + i));
                    }
                    let one = Instant::now();
                    if i % 5 == 0 {
                        assistant.tokens.output = i as u64;
                        let message: Message = assistant.clone().into();
                        store.put_many(&[], &[&message], &[&part]).await.unwrap();
                    } else {
                        store.put_many(&[], &[], &[&part]).await.unwrap();
                    }
                    latencies.push(one.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(TASKS * PER_TASK);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let wall = start.elapsed();
    let cpu = Threads::now().since(&cpu);
    let (median, _, _) = summary(&mut latencies);
    (wall, median, cpu)
}

/// (c) Awaited single writes one after the other: each finds the writer idle.
async fn direct(store: &Arc<dyn Store>) -> (Duration, Cpu) {
    let root = Session::new("proj", "/home/dev/src/project", "direct", 1_000);
    store.put_session(&root).await.unwrap();
    let c = Conversation::new(&root, 0);
    let assistant: Message = c.assistant.clone().into();
    store
        .put_many(&[&c.session], &[&c.user, &assistant], &[])
        .await
        .unwrap();
    settle().await;
    let cpu = Threads::now();
    let start = Instant::now();
    let mut part = c.text.clone();
    for i in 0..DIRECT {
        if let PartKind::Text(t) = &mut part.kind {
            t.text = format!("draft {i}");
        }
        store.put_part(&part).await.unwrap();
    }
    (start.elapsed(), Threads::now().since(&cpu))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut samples: Vec<Duration>) -> Duration {
    summary(&mut samples).0
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(7);
    // Two workers, like the 2-core machines the runtime is measured on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
        println!("SQLite:");
        cases(&store, rounds).await;
        store.flush().await.unwrap();
        let Some(pg) = TestDatabase::create("store bench").await else {
            return;
        };
        let store: Arc<dyn Store> = Arc::new(PostgresStore::open(pg.url()).await.unwrap());
        println!("PostgreSQL:");
        cases(&store, rounds).await;
        store.flush().await.unwrap();
    });
}

/// Each case `rounds` times on `store`, and their medians.
async fn cases(store: &Arc<dyn Store>, rounds: usize) {
    let (mut wall, mut cpu, mut sqlite, mut runtime) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (w, c) = queued(store).await;
        println!(
            "queued round {round}: {:.1} ms wall, {:.1} ms CPU ({:.1} ms in sqlite threads, {:.1} ms in the busiest, {:.1} ms in runtime workers)",
            ms(w),
            ms(c.total),
            ms(c.sqlite),
            ms(c.busiest),
            ms(c.runtime)
        );
        wall.push(w);
        cpu.push(c.total);
        sqlite.push(c.sqlite);
        runtime.push(c.runtime);
    }
    println!(
        "queued: {} upserts (1,111 sessions × message + tool part + step-finish) then a read: median {:.1} ms wall, {:.1} ms CPU, {:.1} ms of it in sqlite threads, {:.1} ms in runtime workers",
        SESSIONS * 3,
        ms(median(wall)),
        ms(median(cpu)),
        ms(median(sqlite)),
        ms(median(runtime))
    );

    let (mut wall, mut latency, mut cpu, mut sqlite) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (w, l, c) = awaited(store).await;
        println!(
            "awaited round {round}: {:.1} ms wall, one call {:.2} ms median, {:.1} ms CPU ({:.1} ms in sqlite threads, {:.1} ms in the busiest)",
            ms(w),
            ms(l),
            ms(c.total),
            ms(c.sqlite),
            ms(c.busiest)
        );
        wall.push(w);
        latency.push(l);
        cpu.push(c.total);
        sqlite.push(c.sqlite);
    }
    println!(
        "awaited: {TASKS} tasks × {PER_TASK} put_many of a part (and every fifth time its message): median {:.1} ms wall, one call {:.2} ms, {:.1} ms CPU, {:.1} ms of it in sqlite threads",
        ms(median(wall)),
        ms(median(latency)),
        ms(median(cpu)),
        ms(median(sqlite))
    );

    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (w, c) = direct(store).await;
        wall.push(w);
        cpu.push(c.total);
    }
    println!(
        "direct: {DIRECT} put_part one after the other: median {:.1} ms wall ({:.1} µs a call), {:.1} ms CPU",
        ms(median(wall.clone())),
        ms(median(wall)) * 1e3 / DIRECT as f64,
        ms(median(cpu))
    );
}
