//! Nested trees of subagents while they run: cancelling the root or one subtree ends every call
//! below it (on both arbiters), and a subtree runs on the arbiter of its top-level child.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::until_idle;
use taskforce_testkit::script::task_call;

use super::{error_of, nesting_env, nesting_model, prompt, task_state};
use crate::suite::runtime::{Env, child_id_in, expect_cancelled, prompt_in_background, tool_parts};

#[actix_rt::test]
async fn cancelling_a_subtree_stops_its_child_while_another_branch_continues_it() {
    // Root → first middle → leaf (answers); then root → second middle, whose call continues
    // that leaf (which stalls). Cancelling the first middle's subtree stops the leaf although
    // it now works for the second middle, whose call reads SUBAGENT_CANCELLED.
    let leaf_id = Arc::new(Mutex::new(String::new()));
    let seen = leaf_id.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        let first = req.last_role() == Some("user");
        let to_middle = r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#;
        if req.contains("LEAF-AGENT-PROMPT") {
            let users = req.messages().iter().filter(|m| m["role"] == "user").count();
            if users == 1 {
                Response::text("leaf done")
            } else {
                Response::text("the leaf never finishes").stall_after(1)
            }
        } else if req.contains("MIDDLE-AGENT-PROMPT") {
            let leaf = seen.lock().unwrap().clone();
            if !first {
                if let Some(id) = child_id_in(&req.raw_body) {
                    *seen.lock().unwrap() = id;
                }
                Response::text("middle done")
            } else if leaf.is_empty() {
                task_call(r#"{"description":"to leaf","prompt":"do it","subagent_type":"leaf"}"#)
            } else {
                task_call(&format!(
                    r#"{{"description":"again","prompt":"go on","subagent_type":"leaf","session_id":"{leaf}"}}"#
                ))
            }
        } else if first || req.messages().iter().filter(|m| m["role"] == "tool").count() == 1 {
            // The root's first turn, and its turn after the first middle's answer.
            task_call(to_middle)
        } else {
            Response::text("root done")
        }
    })
    .await
    .unwrap();
    // Root, first middle, leaf, first middle again, root again, second middle, leaf again.
    let (_env, rt, root, running) = running_tree(&fake, 7, |_| {}).await;
    let middles = rt.children(&root.id).await.unwrap();
    assert_eq!(middles.len(), 2);
    let leaf = rt.children(&middles[0].id).await.unwrap().remove(0);
    assert_eq!(leaf.id.to_string(), *leaf_id.lock().unwrap());
    assert!(rt.statuses().contains_key(&leaf.id), "the leaf runs again");

    rt.cancel(&middles[0].id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the root finished")
        .unwrap()
        .unwrap();
    let state = task_state(&rt, &middles[1].id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_CANCELLED: "),
        "{}",
        error_of(&state)
    );
}

/// A runtime nesting two deep over `fake`, and a root prompted "go" in the background (`before`
/// sees the root first); returned once `requests` model calls came in.
async fn running_tree(
    fake: &FakeOpenAi,
    requests: usize,
    before: impl FnOnce(&Session),
) -> (
    Env,
    Runtime,
    Session,
    tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
) {
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    before(&root);
    let running = prompt_in_background(&rt, &root.id, "go");
    assert!(
        fake.wait_for_requests(requests, Duration::from_secs(10))
            .await
    );
    (env, rt, root, running)
}

/// Cancels `root`, sees its prompt answered cancelled `within`, and waits as long again until
/// no session runs.
async fn cancel_until_idle(
    rt: &Runtime,
    root: &SessionId,
    running: tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
    within: Duration,
) {
    tokio::time::timeout(within, rt.cancel(root))
        .await
        .expect("the cancel returned")
        .unwrap();
    expect_cancelled(running, within, "the root answered").await;
    until_idle(rt).await;
}

#[actix_rt::test]
async fn cancelling_the_root_ends_a_nested_tree_with_every_call_recorded() {
    // Root → middle → leaf, the leaf stalled in its model call.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.contains("LEAF-AGENT-PROMPT") {
            Response::text("the leaf never finishes").stall_after(2)
        } else {
            nesting_model(req)
        }
    })
    .await
    .unwrap();
    let (_env, rt, root, running) = running_tree(&fake, 3, |_| {}).await;
    assert_eq!(rt.statuses().len(), 3, "root, middle and leaf run");
    cancel_until_idle(&rt, &root.id, running, Duration::from_secs(2)).await;
    let middle = rt.children(&root.id).await.unwrap().remove(0);
    let leaf = rt.children(&middle.id).await.unwrap().remove(0);
    // Both task calls ended cancelled, and the leaf's answer is aborted.
    for parent in [&root.id, &middle.id] {
        let state = task_state(&rt, parent).await;
        assert!(
            error_of(&state).starts_with("SUBAGENT_CANCELLED: "),
            "{}",
            error_of(&state)
        );
    }
    let answer = rt.messages(&leaf.id).await.unwrap().pop().unwrap();
    let error = answer.info.as_assistant().unwrap().error.clone().unwrap();
    assert_eq!(error.name(), "MessageAbortedError");
}

/// Root → two middles → a leaf each, `leaf` answering the leaves.
fn two_middles(req: &RecordedRequest, leaf: Response) -> Response {
    let first = req.last_role() == Some("user");
    if req.contains("LEAF-AGENT-PROMPT") {
        leaf
    } else if req.contains("MIDDLE-AGENT-PROMPT") {
        if first {
            task_call(r#"{"description":"to leaf","prompt":"do it","subagent_type":"leaf"}"#)
        } else {
            Response::text("middle done")
        }
    } else if first {
        let middle = r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#;
        Response::tool_calls(&[("call_1", "task", middle), ("call_2", "task", middle)])
    } else {
        Response::text("root done")
    }
}

#[actix_rt::test]
async fn cancelling_the_root_reaches_subtrees_on_both_arbiters() {
    // Root → two middles (one per arbiter) → a stalled leaf each: the middles' runs hang off
    // calls made on the root's arbiter, and at least one of them runs on the other.
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        two_middles(
            req,
            Response::text("the leaf never finishes").stall_after(2),
        )
    })
    .await
    .unwrap();
    let (_env, rt, root, running) = running_tree(&fake, 5, |_| {}).await;
    assert_eq!(
        rt.statuses().len(),
        5,
        "root, two middles and two leaves run"
    );
    let middles = rt.children(&root.id).await.unwrap();
    let root_home = rt.arbiter_of(&root.id).await.unwrap().expect("live");
    let mut elsewhere = 0;
    for middle in &middles {
        if rt.arbiter_of(&middle.id).await.unwrap() != Some(root_home) {
            elsewhere += 1;
        }
    }
    assert!(elsewhere >= 1, "a middle runs on the other arbiter");

    cancel_until_idle(&rt, &root.id, running, Duration::from_secs(2)).await;
    // Every call of the tree ended cancelled, and every leaf's answer is aborted.
    let root_calls = tool_parts(&rt, &root.id).await;
    assert_eq!(root_calls.len(), 2);
    for (_, state) in &root_calls {
        assert!(
            error_of(state).starts_with("SUBAGENT_CANCELLED: "),
            "{}",
            error_of(state)
        );
    }
    for middle in &middles {
        let state = task_state(&rt, &middle.id).await;
        assert!(
            error_of(&state).starts_with("SUBAGENT_CANCELLED: "),
            "{}",
            error_of(&state)
        );
        let leaf = rt.children(&middle.id).await.unwrap().remove(0);
        let answer = rt.messages(&leaf.id).await.unwrap().pop().unwrap();
        let error = answer.info.as_assistant().unwrap().error.clone().unwrap();
        assert_eq!(error.name(), "MessageAbortedError");
    }
}

#[actix_rt::test]
async fn a_nested_subtree_runs_on_the_arbiter_of_its_top_level_child() {
    let fake =
        FakeOpenAi::start(|req: &RecordedRequest| two_middles(req, Response::text("leaf done")))
            .await
            .unwrap();
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = prompt(&rt, "go").await;
    let middles = rt.children(&root).await.unwrap();
    assert_eq!(middles.len(), 2);
    let mut homes = Vec::new();
    for middle in &middles {
        let home = rt.arbiter_of(&middle.id).await.unwrap().expect("live");
        let leaves = rt.children(&middle.id).await.unwrap();
        assert_eq!(leaves.len(), 1);
        assert_eq!(
            rt.arbiter_of(&leaves[0].id).await.unwrap(),
            Some(home),
            "a grandchild runs beside its parent"
        );
        homes.push(home);
    }
    // The runtime has two arbiters: the root's two children run on both.
    assert_ne!(homes[0], homes[1]);
    assert!(rt.arbiter_of(&root).await.unwrap().is_some());
}
