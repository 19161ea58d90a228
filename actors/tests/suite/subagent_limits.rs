//! Subagent limits end to end over real HTTP to the fake OpenAI-compatible server: running
//! children per parent and per runtime (FIFO waiting with `queued` metadata), children per
//! session tree.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, PartKind, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{is_child, last_content, task_calls};

use super::runtime::{Env, tool_parts};
use super::subagents::nesting_env_with;

/// A model call making `n` task calls at once (`part 1` .. `part n`).
fn fan_out(n: u32) -> Response {
    task_calls((1..=n).map(|i| {
        (
            format!("call_{i}"),
            format!(
                r#"{{"description":"part {i}","prompt":"look at part {i}","subagent_type":"explore"}}"#
            ),
        )
    }))
}

/// A fake where parents fan out `n` task calls and children answer slowly.
fn fanning(n: u32) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        if is_child(req) {
            Response::text("findings from one explorer after a careful look")
                .with_delay(Duration::from_millis(30))
        } else if req.last_role() == Some("user") {
            fan_out(n)
        } else {
            Response::text("merged")
        }
    }
}

/// Follows the `queued` flags of every running task call; see [`QueuedWatch::so_far`].
fn watch_queued(rt: &Runtime) -> QueuedWatch {
    let watch = QueuedWatch {
        rt: rt.clone(),
        seen: Arc::new(Mutex::new(Vec::new())),
        marks: Arc::new(Mutex::new(BTreeSet::new())),
    };
    let mut events = rt.subscribe(Filter::All);
    let (out, marks) = (watch.seen.clone(), watch.marks.clone());
    tokio::spawn(async move {
        while let Some(item) = events.next().await {
            let BusItem::Event(envelope) = item else {
                continue;
            };
            if let Event::SessionIdle { session_id } = &envelope.event {
                marks.lock().unwrap().insert(session_id.clone());
            }
            let Event::PartUpdated { part, .. } = &envelope.event else {
                continue;
            };
            let PartKind::Tool(tool) = &part.kind else {
                continue;
            };
            if let ToolState::Running(r) = &tool.state
                && let Some(q) = r.metadata.as_ref().and_then(|m| m.get("queued"))
            {
                out.lock().unwrap().push((
                    part.session_id.clone(),
                    tool.call_id.clone(),
                    q.as_bool().unwrap_or(false),
                ));
            }
        }
    });
    watch
}

/// `(session, call, queued)` of every running task call's update, as the bus delivered them.
struct QueuedWatch {
    rt: Runtime,
    seen: Arc<Mutex<Vec<(SessionId, String, bool)>>>,
    /// Sessions whose `session.idle` the watcher has read (markers included).
    marks: Arc<Mutex<BTreeSet<SessionId>>>,
}

impl QueuedWatch {
    /// What the watcher has read of every event published before this call: a marker event is
    /// published, and the bus's order means all earlier events were read once it is.
    async fn so_far(&self) -> Vec<(SessionId, String, bool)> {
        let marker = SessionId::new();
        self.rt.publish(Event::SessionIdle {
            session_id: marker.clone(),
        });
        let marks = self.marks.clone();
        taskforce_testkit::eventually("the watcher to read the marker", || {
            marks.lock().unwrap().contains(&marker)
        })
        .await;
        self.seen.lock().unwrap().clone()
    }
}

async fn prompt(rt: &Runtime, id: &SessionId, text: &str) {
    tokio::time::timeout(
        Duration::from_secs(30),
        rt.prompt(id, PromptInput::text(text)),
    )
    .await
    .expect("the parent never waits forever")
    .unwrap();
}

/// The most children of `parents` whose assistant messages were streaming at the same time.
async fn peak_overlap(rt: &Runtime, parents: &[&SessionId]) -> usize {
    let mut spans = Vec::new();
    for parent in parents {
        for child in rt.children(parent).await.unwrap() {
            for m in rt.messages(&child.id).await.unwrap() {
                if let Message::Assistant(a) = &*m.info {
                    spans.push((a.time.created, a.time.completed.unwrap()));
                }
            }
        }
    }
    spans
        .iter()
        .map(|(start, _)| {
            spans
                .iter()
                .filter(|(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Every task part of `session` completed.
async fn all_tasks_completed(rt: &Runtime, session: &SessionId) -> usize {
    let parts = tool_parts(rt, session).await;
    for (tool, state) in &parts {
        assert!(
            matches!(state, ToolState::Completed(_)),
            "{tool}: {state:?}"
        );
    }
    parts.len()
}

#[actix_rt::test]
async fn max_concurrent_lets_two_children_stream_at_once_and_queues_the_rest() {
    let fake = FakeOpenAi::start(fanning(4)).await.unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_concurrent = 2\n");
    let rt = env.runtime().await;
    let seen = watch_queued(&rt);
    let parent = rt.create_session(None, None).await.unwrap();
    prompt(&rt, &parent.id, "fan out").await;

    assert_eq!(
        fake.peak_active(),
        2,
        "two children streamed at once, never more"
    );
    assert_eq!(rt.children(&parent.id).await.unwrap().len(), 4);
    assert_eq!(all_tasks_completed(&rt, &parent.id).await, 4);
    assert!(peak_overlap(&rt, &[&parent.id]).await <= 2);

    // Two calls waited: first `queued: true`, then `queued: false` once admitted.
    let seen = seen.so_far().await;
    let mut by_call: BTreeMap<String, Vec<bool>> = BTreeMap::new();
    for (session, call, queued) in seen {
        assert_eq!(session, parent.id);
        by_call.entry(call).or_default().push(queued);
    }
    assert_eq!(by_call.len(), 2, "{by_call:?}");
    for flags in by_call.values() {
        assert_eq!(flags.first(), Some(&true), "{by_call:?}");
        assert_eq!(flags.last(), Some(&false), "{by_call:?}");
    }
}

#[actix_rt::test]
async fn with_one_running_slot_a_steps_calls_run_in_the_order_the_model_made_them() {
    let fake = FakeOpenAi::start(fanning(6)).await.unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_concurrent = 1\n");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    prompt(&rt, &parent.id, "fan out").await;

    let asked: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| is_child(r))
        .map(last_content)
        .filter(|text| text.starts_with("look at part"))
        .collect();
    let made: Vec<String> = (1..=6).map(|i| format!("look at part {i}")).collect();
    assert_eq!(asked, made);
    assert_eq!(fake.peak_active(), 1);
}

#[actix_rt::test]
async fn max_total_spans_parents() {
    let fake = FakeOpenAi::start(fanning(2)).await.unwrap();
    let env = Env::new(
        &fake.base_url(),
        "[subagent]\nmax_concurrent = 8\nmax_total = 2\n",
    );
    let rt = env.runtime().await;
    let seen = watch_queued(&rt);
    let a = rt.create_session(None, None).await.unwrap();
    let b = rt.create_session(None, None).await.unwrap();
    tokio::join!(prompt(&rt, &a.id, "fan out"), prompt(&rt, &b.id, "fan out"));

    for parent in [&a.id, &b.id] {
        assert_eq!(rt.children(parent).await.unwrap().len(), 2);
        assert_eq!(all_tasks_completed(&rt, parent).await, 2);
    }
    assert!(
        peak_overlap(&rt, &[&a.id, &b.id]).await <= 2,
        "never more than two children in the runtime"
    );
    let waited: BTreeSet<(SessionId, String)> = seen
        .so_far()
        .await
        .iter()
        .filter(|(_, _, q)| *q)
        .map(|(s, c, _)| (s.clone(), c.clone()))
        .collect();
    assert_eq!(waited.len(), 2, "two of four calls waited: {waited:?}");
}

#[actix_rt::test]
async fn max_per_session_refuses_the_call_past_it() {
    let fake = FakeOpenAi::start(fanning(3)).await.unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_per_session = 2\n");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    prompt(&rt, &parent.id, "fan out").await;

    assert_eq!(rt.children(&parent.id).await.unwrap().len(), 2);
    let parts = tool_parts(&rt, &parent.id).await;
    let refused: Vec<&ToolState> = parts
        .iter()
        .map(|(_, s)| s)
        .filter(|s| matches!(s, ToolState::Error(_)))
        .collect();
    assert_eq!(refused.len(), 1, "{parts:?}");
    let ToolState::Error(e) = refused[0] else {
        unreachable!()
    };
    assert!(
        e.error.starts_with("SUBAGENT_LIMIT_REACHED: "),
        "{}",
        e.error
    );
    assert!(e.error.contains("max_per_session is 2"), "{}", e.error);
    let metadata = e.metadata.as_ref().unwrap().to_json();
    let details = &metadata["details"];
    assert_eq!(details["error"]["code"], "SUBAGENT_LIMIT_REACHED");
    assert_eq!(details["results"], serde_json::json!([]));

    // The tree stays full for later prompts too.
    prompt(&rt, &parent.id, "fan out again").await;
    assert_eq!(rt.children(&parent.id).await.unwrap().len(), 2);
}

// ---------------------------------------------------------------- nesting under the limits

/// The root fans out `n` middles in one step; each middle calls one leaf, whose answer
/// streams `words` words `every` apart; then each answers.
fn middles_and_leaves(
    n: u32,
    words: usize,
    every: Duration,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        let first = req.last_role() == Some("user");
        if req.contains("LEAF-AGENT-PROMPT") {
            Response::text(&"leafword ".repeat(words)).with_delay(every)
        } else if req.contains("MIDDLE-AGENT-PROMPT") {
            if first {
                Response::tool_calls(&[(
                    "call_leaf",
                    "task",
                    r#"{"description":"to leaf","prompt":"do the leaf part","subagent_type":"leaf"}"#,
                )])
            } else {
                Response::text("middle done")
            }
        } else if first {
            task_calls((1..=n).map(|i| {
                (
                    format!("call_m{i}"),
                    format!(
                        r#"{{"description":"middle {i}","prompt":"split part {i}","subagent_type":"middle"}}"#
                    ),
                )
            }))
        } else {
            Response::text("root done")
        }
    }
}

/// Prompts a new root on `env` and checks that every middle answered `middle done` (within
/// 20 s): no call waited on its own tree.
async fn every_middle_answers(env: &Env, middles: usize) -> (Runtime, SessionId) {
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&root.id, PromptInput::text("go")),
    )
    .await
    .expect("the tree does not wait on itself")
    .unwrap();
    let parts = tool_parts(&rt, &root.id).await;
    assert_eq!(parts.len(), middles, "{parts:?}");
    for (_, state) in &parts {
        let ToolState::Completed(done) = state else {
            panic!("every middle completed: {parts:?}")
        };
        assert!(done.output.starts_with("middle done"), "{}", done.output);
    }
    (rt, root.id)
}

#[actix_rt::test]
async fn middles_filling_max_total_lend_their_slots_to_their_leaves() {
    // Three middles at once under max_total = 2: the middles running hold both slots while
    // they wait for their leaves, which would wait for those slots forever; a waiting middle
    // lends its share, so every leaf runs, never more than two children at work at once.
    let fake = FakeOpenAi::start(middles_and_leaves(3, 5, Duration::from_millis(10)))
        .await
        .unwrap();
    let env = nesting_env_with(
        &fake.base_url(),
        "max_depth = 2\nmax_total = 2\nidle_timeout = \"1h\"\n",
    );
    let (rt, root) = every_middle_answers(&env, 3).await;
    for middle in rt.children(&root).await.unwrap() {
        assert_eq!(rt.children(&middle.id).await.unwrap().len(), 1);
    }
    assert!(fake.peak_active() <= 2, "peak {}", fake.peak_active());
}

#[actix_rt::test]
async fn a_middle_waiting_for_a_slot_or_for_a_working_leaf_is_not_idle() {
    // max_total = 1 and an idle limit of 1 s: each leaf streams for about 1.5 s (a word every
    // 100 ms, far inside the limit even on a loaded machine) while its middle says nothing (its
    // leaf's activity is its own), and the second middle's call waits that long for the one
    // slot (waiting on the runtime is not idling).
    let fake = FakeOpenAi::start(middles_and_leaves(2, 15, Duration::from_millis(100)))
        .await
        .unwrap();
    let env = nesting_env_with(
        &fake.base_url(),
        "max_depth = 2\nmax_total = 1\nidle_timeout = \"1s\"\n",
    );
    every_middle_answers(&env, 2).await;
    assert_eq!(fake.peak_active(), 1);
}

#[actix_rt::test]
async fn cancelling_a_parent_ends_its_queued_call_and_gives_its_tree_count_back() {
    // max_concurrent = 1: the first child stalls, the second call waits for its slot. The
    // cancel ends both calls; the waiting one started no child and its count in the tree
    // (max_per_session = 2) is given back, so a later prompt can still start one.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            if req.contains("look at part 1") {
                Response::text("part one, slowly").stall_after(1)
            } else {
                Response::text("done quickly")
            }
        } else if req.last_role() == Some("user") {
            if req.contains("SECOND-ROUND") {
                task_calls(std::iter::once((
                    "call_again".to_string(),
                    r#"{"description":"again","prompt":"look at part 9","subagent_type":"explore"}"#
                        .to_string(),
                )))
            } else {
                fan_out(2)
            }
        } else {
            Response::text("merged")
        }
    })
    .await
    .unwrap();
    let env = Env::new(
        &fake.base_url(),
        "[subagent]\nmax_concurrent = 1\nmax_per_session = 2\n",
    );
    let rt = env.runtime().await;
    let queued = watch_queued(&rt);
    let root = rt.create_session(None, None).await.unwrap().id;
    let running = {
        let (rt, root) = (rt.clone(), root.clone());
        tokio::spawn(async move { rt.prompt(&root, PromptInput::text("go")).await })
    };
    // Wait until the second call shows it is queued.
    let flags = queued.seen.clone();
    taskforce_testkit::eventually("the second call to be queued", || {
        flags.lock().unwrap().iter().any(|(_, _, q)| *q)
    })
    .await;
    rt.cancel(&root).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the cancel ended the turn");
    let parts = tool_parts(&rt, &root).await;
    assert_eq!(parts.len(), 2, "{parts:?}");
    for (_, state) in &parts {
        let ToolState::Error(e) = state else {
            panic!("both calls were cancelled: {parts:?}")
        };
        assert!(e.error.starts_with("SUBAGENT_CANCELLED: "), "{}", e.error);
    }
    assert_eq!(
        rt.children(&root).await.unwrap().len(),
        1,
        "the queued call started none"
    );

    tokio::time::timeout(
        Duration::from_secs(10),
        rt.prompt(&root, PromptInput::text("SECOND-ROUND")),
    )
    .await
    .expect("the second prompt answers")
    .unwrap();
    let parts = tool_parts(&rt, &root).await;
    let ToolState::Completed(done) = &parts[2].1 else {
        panic!("the tree had room for one more child: {parts:?}")
    };
    assert!(done.output.starts_with("done quickly"), "{}", done.output);
    assert_eq!(rt.children(&root).await.unwrap().len(), 2);
}

#[actix_rt::test]
async fn a_middle_that_times_out_takes_its_working_leaf_down_with_it() {
    // The middle's hard limit (1 s) runs out while its leaf still streams: the leaf is
    // cancelled with it, and the root reads SUBAGENT_TIMEOUT.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        let first = req.last_role() == Some("user");
        if req.contains("LEAF-AGENT-PROMPT") {
            Response::text(&"leafword ".repeat(400)).with_delay(Duration::from_millis(20))
        } else if req.contains("MIDDLE-AGENT-PROMPT") {
            Response::tool_calls(&[(
                "call_leaf",
                "task",
                r#"{"description":"to leaf","prompt":"do the leaf part","subagent_type":"leaf"}"#,
            )])
        } else if first {
            to_middle()
        } else {
            Response::text("root done")
        }
    })
    .await
    .unwrap();
    let env = nesting_env_with(&fake.base_url(), "max_depth = 2\ntimeout = \"1s\"\n");
    let (rt, root, state) = root_call(&env).await;
    let ToolState::Error(e) = &state else {
        panic!("the middle timed out: {state:?}")
    };
    assert!(e.error.starts_with("SUBAGENT_TIMEOUT: "), "{}", e.error);
    assert!(e.error.contains("timeoutReason: runtime"), "{}", e.error);
    let middle = rt.children(&root).await.unwrap().remove(0);
    let leaf = rt.children(&middle.id).await.unwrap().remove(0);
    let statuses = rt.statuses();
    assert!(
        !statuses.contains_key(&middle.id) && !statuses.contains_key(&leaf.id),
        "{statuses:?}"
    );
    // The leaf's answer ended aborted, cut short of its 400 words.
    let messages = rt.messages(&leaf.id).await.unwrap();
    let Message::Assistant(a) = &*messages.last().unwrap().info else {
        panic!("the leaf answered")
    };
    assert_eq!(
        a.error.as_ref().map(|e| e.name()),
        Some("MessageAbortedError")
    );
}

/// The root's one call, to the middle.
fn to_middle() -> Response {
    task_calls(std::iter::once((
        "call_m".to_string(),
        r#"{"description":"middle","prompt":"split it","subagent_type":"middle"}"#.to_string(),
    )))
}

/// Prompts a new root on `env` (answered within 20 s); gives it and its first call's state.
async fn root_call(env: &Env) -> (Runtime, SessionId, ToolState) {
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap().id;
    tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&root, PromptInput::text("go")),
    )
    .await
    .expect("the root answers")
    .unwrap();
    let (_, state) = tool_parts(&rt, &root).await.remove(0);
    (rt, root, state)
}

/// Root → middle (waited for) → leaf started in the background, answering `leaf()`; the
/// middle answers at once, then sums up the leaf's result when it arrives.
fn background_leaf(
    leaf: fn() -> Response,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        let first = req.last_role() == Some("user");
        if req.contains("LEAF-AGENT-PROMPT") {
            leaf()
        } else if req.contains("MIDDLE-AGENT-PROMPT") {
            let delivered = last_content(req);
            if delivered.starts_with("<task_result ") {
                let status = if delivered.contains("status=\"timeout\"") {
                    "timed out"
                } else {
                    "found gold"
                };
                Response::text(&format!("middle summary: the leaf {status}"))
            } else if first {
                task_calls(std::iter::once((
                    "call_leaf".to_string(),
                    r#"{"description":"to leaf","prompt":"dig","subagent_type":"leaf","background":true}"#
                        .to_string(),
                )))
            } else {
                Response::text("started the leaf")
            }
        } else if first {
            to_middle()
        } else {
            Response::text("root done")
        }
    }
}

/// Runs [`background_leaf`] with `leaf` under the `subagent` settings (within 20 s) and checks
/// that the root's call completed with the middle's summary saying `said`; gives the fake
/// server and the call's `details`.
async fn summed_up(leaf: fn() -> Response, subagent: &str, said: &str) -> (FakeOpenAi, Value) {
    let fake = FakeOpenAi::start(background_leaf(leaf)).await.unwrap();
    let env = nesting_env_with(&fake.base_url(), subagent);
    let (_rt, _root, state) = root_call(&env).await;
    let ToolState::Completed(done) = &state else {
        panic!("the middle's call completed: {state:?}")
    };
    let expected = format!("middle summary: the leaf {said}");
    assert!(done.output.starts_with(&expected), "{}", done.output);
    (fake, done.metadata.to_json()["details"].clone())
}

#[actix_rt::test]
async fn a_call_waits_for_its_childs_background_children_and_answers_with_their_results() {
    // The middle starts its leaf in the background and answers at once; the root's call waits
    // until the leaf's result has reached the middle and the middle's turn on it has ended, and
    // answers with that turn's text. Under max_total = 1 the waiting middle lends its share, so
    // the leaf can run at all.
    let (fake, details) = summed_up(
        || Response::text("leaf found gold").with_delay(Duration::from_millis(20)),
        "max_depth = 2\nmax_total = 1\nidle_timeout = \"1s\"\n",
        "found gold",
    )
    .await;
    // Its usage counts the middle's turns since the call began: three.
    assert_eq!(details["results"][0]["usage"]["turns"], 3, "{details}");
    let root_turn = fake
        .requests()
        .into_iter()
        .filter(|r| !r.contains("MIDDLE-AGENT-PROMPT") && !r.contains("LEAF-AGENT-PROMPT"))
        .nth(1)
        .unwrap();
    assert!(root_turn.contains("the leaf found gold"));
    assert_eq!(fake.peak_active(), 1);
}

#[actix_rt::test]
async fn a_stalled_background_grandchild_ends_at_its_own_idle_limit_and_the_call_answers() {
    // The middle, idle while it waits, is not timed out; its leaf is, and the middle sums that up.
    summed_up(
        || Response::text("digging and then nothing").stall_after(2),
        "max_depth = 2\ntimeout = \"1h\"\nidle_timeout = \"300ms\"\n",
        "timed out",
    )
    .await;
}
