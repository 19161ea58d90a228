//! Looking after a running background child: `task_status` reports it with its output and
//! `task_cancel` stops it; a session of another tree is refused, and so is continuing a
//! background child that runs or is only queued; a root's background children are spread over
//! the arbiters.

use std::time::Duration;

use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::{until, until_first_child_runs, until_idle};
use taskforce_testkit::script::{is_child, last_content, task_call, task_calls, tool_results};

use super::{BACKGROUND, call, child_in, deliveries, outputs_of, session_in, wait_for_messages};
use crate::suite::runtime::Env;

#[actix_rt::test]
async fn task_status_reports_a_running_child_with_its_output_and_task_cancel_stops_it() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            return Response::text("partial child words that never end").stall_after(3);
        }
        // The script goes by the tool results so far, whenever the delivery comes in.
        let args = format!(r#"{{"session_id":"{}"}}"#, child_in(req));
        match tool_results(req) {
            0 => task_call(BACKGROUND),
            // Slow enough for the child's first words to be written.
            1 => call("call_s1", "task_status", args).with_delay(Duration::from_millis(300)),
            2 => call("call_c", "task_cancel", args),
            3 => call("call_s2", "task_status", args),
            _ => Response::text("all done"),
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&parent.id, PromptInput::text("go")),
    )
    .await
    .unwrap()
    .unwrap();
    let child = rt.children(&parent.id).await.unwrap().remove(0);
    let status = outputs_of(&rt, &parent.id, "task_status").await;
    assert_eq!(status.len(), 2, "{status:?}");
    assert!(
        status[0].starts_with(&format!(
            "<task_status session_id=\"{}\" status=\"running\">",
            child.id
        )),
        "{}",
        status[0]
    );
    assert!(
        status[0].contains("partial child"),
        "its output so far: {}",
        status[0]
    );
    let cancel = outputs_of(&rt, &parent.id, "task_cancel").await;
    assert!(cancel[0].contains("status=\"cancelled\""), "{}", cancel[0]);
    assert!(status[1].contains("status=\"cancelled\""), "{}", status[1]);
    assert!(!rt.statuses().contains_key(&child.id), "the child stopped");
    // The cancelled result reaches the parent too (picked up by its running loop, or stored).
    wait_for_messages(&rt, &parent.id, "the cancelled result", |m| {
        deliveries(m)
            .iter()
            .any(|d| d.contains("status=\"cancelled\""))
    })
    .await;
}

#[actix_rt::test]
async fn task_status_refuses_a_session_of_another_tree() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            let other = session_in(&last_content(req)).unwrap_or_default();
            call(
                "call_s",
                "task_status",
                format!(r#"{{"session_id":"{other}"}}"#),
            )
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let other = rt.create_session(None, None).await.unwrap();
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(
        &parent.id,
        PromptInput::text(format!("peek at {}", other.id)),
    )
    .await
    .unwrap();
    let status = outputs_of(&rt, &parent.id, "task_status").await;
    assert!(
        status[0].contains(&format!(
            "session {} was not started by this session",
            other.id
        )),
        "{}",
        status[0]
    );
}

#[actix_rt::test]
async fn a_running_background_child_cannot_be_continued_by_another_call() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("digging and never done").stall_after(2)
        } else if last_content(req).contains("<task_result ") {
            Response::text("all done")
        } else if tool_results(req) == 0 {
            task_call(BACKGROUND)
        } else if tool_results(req) == 1 {
            let again = format!(
                r#"{{"description":"More","prompt":"Dig more","subagent_type":"general","session_id":"{}"}}"#,
                child_in(req)
            );
            call("call_again", "task", again)
        } else {
            Response::text("waiting")
        }
    })
    .await
    .unwrap();
    let (_env, rt, parent) = went(&fake, "").await;
    let child = rt.children(&parent).await.unwrap().remove(0).id;
    let outputs = outputs_of(&rt, &parent, "task").await;
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert!(
        outputs[1].starts_with(&format!(
            "INVALID_INPUT: session_id {child} is still running in the background"
        )),
        "{outputs:?}"
    );
    // The refused call did not disturb the child: it runs (on a loaded machine it may only be
    // starting when the parent's turn ends), and once stopped its one result arrives.
    let child_id = &child;
    until(&rt, "the child to run", |rt| async move {
        rt.statuses().contains_key(child_id)
    })
    .await;
    rt.cancel(&child).await.unwrap();
    wait_for_messages(&rt, &parent, "the result", |m| deliveries(m).len() == 1).await;
    let messages = rt.messages(&parent).await.unwrap();
    assert!(deliveries(&messages)[0].contains("status=\"cancelled\""));
    assert_eq!(rt.children(&parent).await.unwrap().len(), 1);
}

#[actix_rt::test]
async fn a_queued_background_child_not_stored_yet_cannot_be_continued() {
    // Under max_total = 1 the second background child waits for a slot, so it has no stored
    // row yet when the parent names it: the call is refused, not taken for a new session.
    let nth_child = |req: &RecordedRequest, n: usize| {
        req.messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str().and_then(session_in))
            .nth(n)
            .unwrap_or_default()
    };
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            Response::text("digging and never done").stall_after(2)
        } else if tool_results(req) == 0 {
            call("call_a", "task", BACKGROUND.into())
        } else if tool_results(req) == 1 {
            call("call_b", "task", BACKGROUND.into())
        } else if tool_results(req) == 2 {
            let again = format!(
                r#"{{"description":"More","prompt":"Dig more","subagent_type":"general","session_id":"{}"}}"#,
                nth_child(req, 1)
            );
            call("call_again", "task", again)
        } else {
            Response::text("waiting")
        }
    })
    .await
    .unwrap();
    let (_env, rt, parent) = went(&fake, "[subagent]\nmax_total = 1\n").await;
    let outputs = outputs_of(&rt, &parent, "task").await;
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    let queued = session_in(&outputs[1]).unwrap();
    assert!(
        outputs[2].starts_with(&format!(
            "INVALID_INPUT: session_id {queued} is still running in the background"
        )),
        "{outputs:?}"
    );
    // The running child stores its row with its first message, which a loaded machine may not
    // have reached yet.
    until_first_child_runs(&rt, &parent).await;
    rt.cancel(&parent).await.unwrap();
    until_idle(&rt).await;
    // No third child was made; the queued one was cancelled before it stored anything.
    let children = rt.children(&parent).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    assert_eq!(children[0].id.to_string(), session_in(&outputs[0]).unwrap());
}

#[actix_rt::test]
async fn a_roots_background_children_are_spread_over_the_arbiters() {
    // Four background children of one step, all stalled in their model calls: with two
    // arbiters, each runs two of them (the root's arbiter is not left to run them all).
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("digging and never done").stall_after(2)
        } else if tool_results(req) == 0 {
            // Four different calls (four identical ones in a row would be asked about as a
            // loop).
            task_calls((0..4).map(|i| {
                let input = format!(
                    r#"{{"description":"Dig {i}","prompt":"Dig deep","subagent_type":"general","background":true}}"#
                );
                (format!("call_{i}"), input)
            }))
        } else {
            Response::text("waiting")
        }
    })
    .await
    .unwrap();
    let (_env, rt, parent) = went(&fake, "").await;
    // A child's row is stored with its first message.
    until(&rt, "the four children to run", |rt| {
        let parent = parent.clone();
        async move {
            let children = rt.children(&parent).await.unwrap();
            children.len() == 4 && children.iter().all(|c| rt.statuses().contains_key(&c.id))
        }
    })
    .await;
    let mut per_arbiter = [0; 2];
    for child in rt.children(&parent).await.unwrap() {
        let arbiter = rt.arbiter_of(&child.id).await.unwrap().expect("running");
        per_arbiter[arbiter] += 1;
    }
    assert_eq!(per_arbiter, [2, 2]);
    rt.cancel(&parent).await.unwrap();
    until_idle(&rt).await;
}

/// A runtime on `fake` whose project adds `config`, and a parent session in it that was
/// prompted `go` and answered.
async fn went(fake: &FakeOpenAi, config: &str) -> (Env, Runtime, SessionId) {
    let env = Env::new(&fake.base_url(), config);
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap().id;
    rt.prompt(&parent, PromptInput::text("go")).await.unwrap();
    (env, rt, parent)
}
