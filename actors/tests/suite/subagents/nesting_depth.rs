//! How deep subagents may nest: a child keeps the task tool only below the maximum depth, a
//! call past it gets the depth code, and a child may not continue the root that waits for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskforce_actors::PromptInput;
use taskforce_agents::model::ToolState;
use taskforce_agents::tool::{TaskEnvelope, TaskErrorCode, TaskMode};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::task_call;

use super::{error_of, metadata_of, nesting_env, nesting_model, prompt, task_state};

#[actix_rt::test]
async fn max_depth_2_nests_root_child_grandchild_and_stops_there() {
    let fake = FakeOpenAi::start(nesting_model).await.unwrap();
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = prompt(&rt, "go").await;
    let middle = rt.children(&root).await.unwrap().remove(0);
    assert!(
        middle.title.contains("@middle subagent"),
        "{}",
        middle.title
    );
    let leaf = rt.children(&middle.id).await.unwrap().remove(0);
    assert!(leaf.title.contains("@leaf subagent"), "{}", leaf.title);
    assert!(
        rt.children(&leaf.id).await.unwrap().is_empty(),
        "depth 3 never starts"
    );

    let requests = fake.requests();
    let (middles, rest): (Vec<_>, Vec<_>) = requests
        .iter()
        .partition(|r| r.contains("MIDDLE-AGENT-PROMPT"));
    let leaves: Vec<_> = rest
        .iter()
        .filter(|r| r.contains("LEAF-AGENT-PROMPT"))
        .collect();
    assert!(!middles.is_empty() && !leaves.is_empty());
    // Depth 1 < 2: the child keeps the task tool; depth 2: the grandchild has none.
    for r in &middles {
        assert!(r.tool_names().contains(&"task"), "{:?}", r.tool_names());
    }
    for r in &leaves {
        assert!(!r.tool_names().contains(&"task"), "{:?}", r.tool_names());
        assert!(r.tool_names().contains(&"read"));
    }

    // The grandchild's forced call got the code, as a management result.
    let state = task_state(&rt, &leaf.id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_DEPTH_EXCEEDED: "),
        "{}",
        error_of(&state)
    );
    let envelope = TaskEnvelope::from_metadata(&metadata_of(&state)).unwrap();
    assert_eq!(envelope.mode, TaskMode::Management);
    assert_eq!(
        envelope.error.unwrap().code,
        TaskErrorCode::SubagentDepthExceeded
    );
    assert!(envelope.results.is_empty());

    // The answers flowed back up.
    let ToolState::Completed(m) = task_state(&rt, &middle.id).await else {
        panic!("the middle's task completed")
    };
    assert!(m.output.starts_with("leaf done"), "{}", m.output);
    assert_eq!(
        m.metadata.to_json()["details"]["results"][0]["agent"],
        "leaf"
    );
    let ToolState::Completed(r) = task_state(&rt, &root).await else {
        panic!("the root's task completed")
    };
    assert!(r.output.starts_with("middle done"), "{}", r.output);
}

#[actix_rt::test]
async fn a_child_may_not_continue_its_own_root_which_is_waiting_for_it() {
    // Root → middle, and the middle's task call names the root as the session to continue:
    // each would wait for the other, so the call is refused and the tree finishes.
    let root_id = Arc::new(Mutex::new(String::new()));
    let seen = root_id.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        let first = req.last_role() == Some("user");
        if req.contains("MIDDLE-AGENT-PROMPT") {
            if first {
                let root = seen.lock().unwrap().clone();
                task_call(&format!(
                    r#"{{"description":"back up","prompt":"go on","subagent_type":"middle","session_id":"{root}"}}"#
                ))
            } else {
                Response::text("middle done")
            }
        } else if first {
            task_call(r#"{"description":"to middle","prompt":"split it","subagent_type":"middle"}"#)
        } else {
            Response::text("root done")
        }
    })
    .await
    .unwrap();
    let env = nesting_env(&fake.base_url(), 2);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    *root_id.lock().unwrap() = root.id.to_string();
    tokio::time::timeout(
        Duration::from_secs(10),
        rt.prompt(&root.id, PromptInput::text("go")),
    )
    .await
    .expect("the tree finishes")
    .unwrap();
    let middle = rt.children(&root.id).await.unwrap().remove(0);
    let state = task_state(&rt, &middle.id).await;
    let error = error_of(&state);
    assert!(
        error.starts_with(&format!(
            "INVALID_INPUT: session_id {} is an ancestor of the calling session",
            root.id
        )),
        "{error}"
    );
    assert!(rt.children(&middle.id).await.unwrap().is_empty());
    let ToolState::Completed(r) = task_state(&rt, &root.id).await else {
        panic!("the root's task completed")
    };
    assert!(r.output.starts_with("middle done"), "{}", r.output);
}

#[actix_rt::test]
async fn default_depth_1_keeps_children_from_delegating() {
    let fake = FakeOpenAi::start(nesting_model).await.unwrap();
    let env = nesting_env(&fake.base_url(), 1);
    let rt = env.runtime().await;
    let root = prompt(&rt, "go").await;
    let middle = rt.children(&root).await.unwrap().remove(0);
    assert!(rt.children(&middle.id).await.unwrap().is_empty());
    for r in fake
        .requests()
        .iter()
        .filter(|r| r.contains("MIDDLE-AGENT-PROMPT"))
    {
        assert!(!r.tool_names().contains(&"task"), "{:?}", r.tool_names());
    }
    // The child's call anyway reads the depth code rather than "unavailable tool".
    let state = task_state(&rt, &middle.id).await;
    assert!(
        error_of(&state).starts_with("SUBAGENT_DEPTH_EXCEEDED: "),
        "{}",
        error_of(&state)
    );
}
