//! Background children under the subagent limits, end to end over real HTTP to the fake
//! OpenAI-compatible server: they take running slots (`max_concurrent`, `max_total`), count in
//! their tree (`max_per_session`), can be cancelled while they wait, and stop at
//! `subagent.timeout` / `subagent.idle_timeout` with a `timeout` result that keeps their partial
//! output. Durations are short configured values; the tests assert outcomes and the order of
//! events, never elapsed time.

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolState;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{is_child, tool_results};

use super::background::{call, deliveries, outputs_of, wait_for_messages};
use super::runtime::{Env, tool_parts};

fn background(name: &str) -> String {
    format!(
        r#"{{"description":"Job {name}","prompt":"Dig {name}","subagent_type":"general","background":true}}"#
    )
}

/// Which background child (`A`, `B`, …) `req` belongs to, if it is a child's request.
fn child_name(req: &RecordedRequest) -> Option<char> {
    if !is_child(req) {
        return None;
    }
    ['A', 'B', 'C']
        .into_iter()
        .find(|n| req.contains(&format!("Dig {n}")))
}

/// Both background calls in one step.
fn two_background_calls() -> Response {
    let (a, b) = (background("A"), background("B"));
    Response::tool_calls(&[
        ("call_a", "task", a.as_str()),
        ("call_b", "task", b.as_str()),
    ])
}

/// A runtime on `fake` whose project adds `config`, and a parent session in it.
async fn start(fake: &FakeOpenAi, config: &str) -> (Env, Runtime, SessionId) {
    let env = Env::new(&fake.base_url(), config);
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap().id;
    (env, rt, parent)
}

/// Prompts `parent` with `go` and waits for its answer (at most 20 s).
async fn go(rt: &Runtime, parent: &SessionId) {
    tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(parent, PromptInput::text("go")),
    )
    .await
    .expect("the parent answers")
    .unwrap();
}

/// Whether a `<task_result>` delivery among `messages` mentions `needle`.
fn delivery_with(messages: &[taskforce_actors::store::MessageWithParts], needle: &str) -> bool {
    deliveries(messages).iter().any(|d| d.contains(needle))
}

#[actix_rt::test]
async fn a_background_child_waits_for_a_slot_and_starts_when_the_one_before_it_ends() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| match child_name(req) {
        Some('A') => Response::text(&"alpha ".repeat(20)).with_delay(Duration::from_millis(15)),
        Some(_) => Response::text("beta done"),
        None if tool_results(req) == 0 => two_background_calls(),
        None => Response::text("waiting for results"),
    })
    .await
    .unwrap();
    let (_env, rt, parent) = start(&fake, "[subagent]\nmax_concurrent = 1\n").await;
    let mut events = rt.subscribe(Filter::All);
    go(&rt, &parent).await;
    // Both calls answered at once; both results arrive later, one after the other.
    wait_for_messages(&rt, &parent, "both results", |m| deliveries(m).len() == 2).await;
    let messages = rt.messages(&parent).await.unwrap();
    let delivered = deliveries(&messages);
    assert!(
        delivered.iter().any(|d| d.contains("alpha")),
        "{delivered:?}"
    );
    assert!(
        delivered.iter().any(|d| d.contains("beta done")),
        "{delivered:?}"
    );
    assert!(delivered.iter().all(|d| d.contains("status=\"completed\"")));

    // The two calls of one step may take the slot in either order; the second child went
    // busy only after the first went idle.
    let children: Vec<SessionId> = rt
        .children(&parent)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(children.len(), 2);
    let mut order: Vec<(usize, &'static str)> = Vec::new();
    while let Some(Some(item)) = events.next().now_or_never() {
        if let BusItem::Event(e) = item {
            match &e.event {
                Event::SessionIdle { session_id } => {
                    if let Some(i) = children.iter().position(|c| c == session_id) {
                        order.push((i, "idle"));
                    }
                }
                Event::SessionStatus { session_id, .. } => {
                    if let Some(i) = children.iter().position(|c| c == session_id) {
                        order.push((i, "status"));
                    }
                }
                _ => {}
            }
        }
    }
    let first = order.first().expect("a child ran").0;
    let second = 1 - first;
    let first_idle = order
        .iter()
        .position(|&(i, what)| i == first && what == "idle")
        .expect("the first child went idle");
    let second_start = order
        .iter()
        .position(|&(i, _)| i == second)
        .expect("the second child ran");
    assert!(
        first_idle < second_start,
        "the second child started before the first ended: {order:?}"
    );
}

#[actix_rt::test]
async fn task_status_shows_a_queued_child_and_task_cancel_removes_it_from_the_queue() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if let Some(name) = child_name(req) {
            assert_eq!(name, 'A', "B was cancelled while queued and must never run");
            return Response::text("alpha forever").stall_after(2);
        }
        // B's id is in the second tool result (the answer to B's background call).
        let b = req
            .messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .nth(1)
            .and_then(|m| {
                m["content"]
                    .as_str()
                    .and_then(super::background::session_in)
            })
            .unwrap_or_default();
        let args = format!(r#"{{"session_id":"{b}"}}"#);
        match tool_results(req) {
            0 => Response::tool_calls(&[("call_a", "task", background("A").as_str())]),
            1 => Response::tool_calls(&[("call_b", "task", background("B").as_str())]),
            2 => call("call_s", "task_status", args),
            3 => call("call_c", "task_cancel", args),
            _ => Response::text("done"),
        }
    })
    .await
    .unwrap();
    let (_env, rt, parent) = start(&fake, "[subagent]\nmax_concurrent = 1\n").await;
    go(&rt, &parent).await;
    let status = outputs_of(&rt, &parent, "task_status").await;
    assert!(status[0].contains("status=\"queued\""), "{}", status[0]);
    let cancel = outputs_of(&rt, &parent, "task_cancel").await;
    assert!(cancel[0].contains("status=\"cancelled\""), "{}", cancel[0]);
    wait_for_messages(&rt, &parent, "B's cancelled result", |m| {
        delivery_with(m, "status=\"cancelled\"")
    })
    .await;
    // A still runs; cancelling the parent ends it.
    let before = fake.requests().len();
    rt.cancel(&parent).await.unwrap();
    wait_for_messages(&rt, &parent, "A's cancelled result", |m| {
        deliveries(m)
            .iter()
            .filter(|d| d.contains("status=\"cancelled\""))
            .count()
            == 2
    })
    .await;
    assert!(fake.requests().iter().all(|r| child_name(r) != Some('B')));
    // Cancelled results start no parent turn (A's arrives after the cancel).
    let turns = fake.requests()[before..]
        .iter()
        .filter(|r| !is_child(r))
        .count();
    assert_eq!(turns, 0, "a cancelled result started a turn");
}

#[actix_rt::test]
async fn max_total_counts_background_children_against_foreground_calls() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| match child_name(req) {
        Some('A') => Response::text(&"alpha ".repeat(20)).with_delay(Duration::from_millis(15)),
        Some(_) => Response::text("foreground done"),
        None if tool_results(req) == 0 => {
            Response::tool_calls(&[("call_a", "task", background("A").as_str())])
        }
        None if tool_results(req) == 1 => Response::tool_calls(&[(
            "call_f",
            "task",
            r#"{"description":"Job F","prompt":"Dig C","subagent_type":"general"}"#,
        )]),
        None => Response::text("all done"),
    })
    .await
    .unwrap();
    let (_env, rt, parent) = start(&fake, "[subagent]\nmax_concurrent = 8\nmax_total = 1\n").await;
    let mut events = rt.subscribe(Filter::All);
    go(&rt, &parent).await;
    // The foreground call waited (queued) until the background child ended.
    let mut queued = Vec::new();
    let mut a_idle_at = None;
    let mut seen = 0;
    while let Some(Some(item)) = events.next().now_or_never() {
        seen += 1;
        if let BusItem::Event(e) = item {
            match &e.event {
                Event::PartUpdated { part, .. } => {
                    if let Some(tool) = part.as_tool()
                        && tool.tool == "task"
                        && tool.state.input().get("background").is_none()
                        && let Some(q) = tool
                            .state
                            .metadata()
                            .and_then(|m| m.get("queued"))
                            .and_then(|v| v.as_bool())
                    {
                        queued.push((seen, q));
                    }
                }
                Event::SessionIdle { session_id }
                    if session_id.as_str() != parent.as_str() && a_idle_at.is_none() =>
                {
                    a_idle_at = Some(seen);
                }
                _ => {}
            }
        }
    }
    assert_eq!(queued.first().map(|q| q.1), Some(true), "{queued:?}");
    let released = queued.iter().find(|q| !q.1).expect("admitted later").0;
    assert!(
        a_idle_at.is_some_and(|a| a < released),
        "{queued:?} {a_idle_at:?}"
    );
}

#[actix_rt::test]
async fn max_per_session_counts_background_children() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| match child_name(req) {
        Some(_) => Response::text("child done"),
        None if tool_results(req) == 0 => two_background_calls(),
        None => Response::text("done"),
    })
    .await
    .unwrap();
    let (_env, rt, parent) = start(&fake, "[subagent]\nmax_per_session = 1\n").await;
    go(&rt, &parent).await;
    let parts = tool_parts(&rt, &parent).await;
    let refused: Vec<_> = parts
        .iter()
        .filter_map(|(_, s)| match s {
            ToolState::Error(e) => Some(e),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "{parts:?}");
    let e = refused[0];
    assert!(
        e.error.starts_with("SUBAGENT_LIMIT_REACHED: "),
        "{}",
        e.error
    );
    let metadata = e.metadata.as_ref().unwrap().to_json();
    assert_eq!(
        metadata["details"]["error"]["code"], "SUBAGENT_LIMIT_REACHED",
        "{metadata:?}"
    );
    assert_eq!(metadata["details"]["mode"], "single", "{metadata:?}");
}

#[actix_rt::test]
async fn a_stalled_background_child_times_out_idle_with_its_output_and_frees_its_slot() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| match child_name(req) {
        Some('A') => Response::text("partial words and then nothing").stall_after(3),
        Some(_) => Response::text("beta done"),
        None if tool_results(req) == 0 => two_background_calls(),
        None => Response::text("noted"),
    })
    .await
    .unwrap();
    let (_env, rt, parent) = start(
        &fake,
        // Long enough that the quick child never idles out on a loaded machine.
        "[subagent]\nmax_concurrent = 1\ntimeout = \"1h\"\nidle_timeout = \"2s\"\n",
    )
    .await;
    go(&rt, &parent).await;
    wait_for_messages(&rt, &parent, "both results", |m| deliveries(m).len() == 2).await;
    let messages = rt.messages(&parent).await.unwrap();
    let delivered = deliveries(&messages);
    let a = delivered
        .iter()
        .find(|d| d.contains("status=\"timeout\""))
        .unwrap_or_else(|| panic!("{delivered:?}"));
    assert!(a.contains("partial"), "{a}");
    assert!(a.contains("SUBAGENT_TIMEOUT"), "{a}");
    assert!(a.contains("timeoutReason: idle"), "{a}");
    // The slot came back: B ran after A was stopped.
    assert!(
        delivered
            .iter()
            .any(|d| d.contains("status=\"completed\"") && d.contains("beta done")),
        "{delivered:?}"
    );
}

#[actix_rt::test]
async fn a_background_child_stops_at_its_hard_timeout() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| match child_name(req) {
        Some(_) => Response::text(&"word ".repeat(200)).with_delay(Duration::from_millis(40)),
        None if tool_results(req) == 0 => {
            Response::tool_calls(&[("call_a", "task", background("A").as_str())])
        }
        None => Response::text("noted"),
    })
    .await
    .unwrap();
    let (_env, rt, parent) = start(
        &fake,
        // Long enough for the child's first words on a loaded machine, far short of its 8 s
        // answer.
        "[subagent]\ntimeout = \"2s\"\nidle_timeout = \"1h\"\n",
    )
    .await;
    go(&rt, &parent).await;
    wait_for_messages(&rt, &parent, "the timed-out result", |m| {
        delivery_with(m, "status=\"timeout\"")
    })
    .await;
    let messages = rt.messages(&parent).await.unwrap();
    let delivered = deliveries(&messages);
    assert!(
        delivered[0].contains("timeoutReason: runtime"),
        "{delivered:?}"
    );
    assert!(delivered[0].contains("word"), "{delivered:?}");
}
