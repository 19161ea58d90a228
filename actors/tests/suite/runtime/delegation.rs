//! A parent delegating to a child through the task tool: the answer it reads back, an unknown
//! agent, children running side by side, the model a child runs on, and the parent's task part
//! following the child live.

use std::time::Duration;

use taskforce_actors::PromptInput;
use taskforce_agents::model::{Message, PartKind, ToolState, ToolStatus};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::script::{delegating, is_child, task_call, task_calls};

use super::{Env, text_of, tool_parts};

#[actix_rt::test]
async fn parent_delegates_to_child_and_reads_its_answer() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Look around","prompt":"List the files","subagent_type":"general"}"#,
        "The project has one file: notes.txt.",
        "Done: the child says there is one file.",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .prompt(&parent.id, PromptInput::text("What is here?"))
        .await
        .unwrap();
    assert_eq!(text_of(&answer), "Done: the child says there is one file.");

    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(children.len(), 1);
    let child = &children[0];
    assert_eq!(child.parent_id.as_ref(), Some(&parent.id));
    assert_eq!(child.title, "Look around (@general subagent)");

    let parts = tool_parts(&rt, &parent.id).await;
    assert_eq!(parts.len(), 1);
    let ToolState::Completed(done) = &parts[0].1 else {
        panic!("task part should be completed: {:?}", parts[0].1)
    };
    assert_eq!(
        done.output,
        format!(
            "The project has one file: notes.txt.\n\n<task_metadata>\nsession_id: {}\n</task_metadata>",
            child.id
        )
    );
    assert_eq!(done.title, "Look around");
    assert_eq!(done.metadata["sessionId"], child.id.as_str());
    assert_eq!(
        done.metadata["model"],
        serde_json::json!({"providerID": "fake", "modelID": "gpt-test"})
    );

    // The parent's model saw the task result; the child's request offered no delegation tools.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].contains("<task_metadata>"));
    let child_request = requests.iter().find(|r| is_child(r)).unwrap();
    for hidden in ["task", "todowrite", "todoread"] {
        assert!(
            !child_request.tool_names().contains(&hidden),
            "{hidden} offered to the child"
        );
    }
    assert!(child_request.tool_names().contains(&"read"));
    assert!(requests[0].tool_names().contains(&"todowrite"));
}

#[actix_rt::test]
async fn unknown_agent_error_reaches_the_model_and_creates_no_session() {
    let fake = FakeOpenAi::start(|req| {
        if req.last_role() == Some("user") {
            task_call(r#"{"description":"x","prompt":"y","subagent_type":"nope"}"#)
        } else {
            Response::text("understood")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    assert!(rt.children(&parent.id).await.unwrap().is_empty());
    let requests = fake.requests();
    assert!(requests[1].contains("Unknown agent type: nope is not a valid agent type"));
}

#[actix_rt::test]
async fn parallel_children_overlap_in_time() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("partial findings from one explorer").with_delay(Duration::from_millis(40))
        } else if req.last_role() == Some("user") {
            let call = |n: u32| {
                (
                    format!("call_{n}"),
                    format!(r#"{{"description":"part {n}","prompt":"look at part {n}","subagent_type":"explore"}}"#),
                )
            };
            task_calls((1..=3).map(call))
        } else {
            Response::text("merged")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("fan out"))
        .await
        .unwrap();
    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(children.len(), 3);
    let mut spans = Vec::new();
    for child in &children {
        for m in rt.messages(&child.id).await.unwrap() {
            if let Message::Assistant(a) = &*m.info {
                spans.push((a.time.created, a.time.completed.unwrap()));
            }
        }
    }
    let latest_start = spans.iter().map(|s| s.0).max().unwrap();
    let earliest_end = spans.iter().map(|s| s.1).min().unwrap();
    assert!(
        latest_start < earliest_end,
        "every child started before any finished: {spans:?}"
    );
}

#[actix_rt::test]
async fn child_model_is_the_agents_own_else_the_callers() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("child")
        } else if req.last_role() == Some("user") {
            let last = req
                .messages()
                .last()
                .map(|m| m["content"].to_string())
                .unwrap_or_default();
            let agent = if last.contains("use explore") {
                "explore"
            } else {
                "general"
            };
            task_call(&format!(
                r#"{{"description":"d","prompt":"p","subagent_type":"{agent}"}}"#
            ))
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(
        &fake.base_url(),
        "\n[agent.explore]\nmodel = \"fake/explorer-model\"\n",
    );
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("use explore"))
        .await
        .unwrap();
    rt.prompt(&parent.id, PromptInput::text("use general"))
        .await
        .unwrap();
    let child_models: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| is_child(r))
        .map(|r| r.body["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(child_models, ["explorer-model", "gpt-test"]);
    let parent_models: Vec<&str> = fake
        .requests()
        .iter()
        .filter(|r| !is_child(r))
        .map(|r| r.body["model"].as_str().unwrap_or(""))
        .map(|m| if m == "gpt-test" { "gpt-test" } else { "other" })
        .collect();
    assert!(parent_models.iter().all(|m| *m == "gpt-test"));
}

#[actix_rt::test]
async fn the_parent_task_part_follows_the_child_live() {
    use futures::StreamExt;
    use taskforce_actors::bus::{BusItem, Event, Filter};

    // The child's call runs until the test lets it end, so that its running state is seen
    // (the parent's part takes a burst of the child's events in one change).
    const WAIT: &str = r#"{"command":"until [ -e release ]; do sleep 0.01; done; echo released"}"#;
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("call_wait", "bash", WAIT)])
            } else {
                Response::text("released")
            }
        } else if req.last_role() == Some("user") {
            task_call(r#"{"description":"Wait a while","prompt":"wait for release","subagent_type":"general"}"#)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(parent.id.clone()));
    let running = super::prompt_in_background(&rt, &parent.id, "go");
    // The statuses of the child's call, as the parent's running part shows them.
    let mut statuses: Vec<String> = Vec::new();
    let mut released = false;
    // Until the running part shows the child's call completed, or the task itself completes
    // (a busy machine may bring the call's end and the child's in one burst: the part then
    // goes from the running call straight to its end, whose summary is checked below).
    while statuses.last().map(String::as_str) != Some("completed") {
        let Ok(Some(BusItem::Event(e))) =
            tokio::time::timeout(Duration::from_secs(10), events.next()).await
        else {
            panic!("the parent's part stopped changing at {statuses:?}")
        };
        if let Event::PartUpdated { part, .. } = &e.event
            && let PartKind::Tool(t) = &part.kind
        {
            match &t.state {
                ToolState::Completed(_) if released => break,
                ToolState::Running(r) => {
                    if let Some(meta) = &r.metadata {
                        assert_eq!(r.title.as_deref(), Some("Wait a while"));
                        if let Some(summary) = meta.to_json().get("summary") {
                            assert_eq!(summary[0]["tool"], "bash");
                            statuses
                                .push(summary[0]["state"]["status"].as_str().unwrap().to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        if !released && statuses.iter().any(|s| s == "running") {
            std::fs::write(env.project().join("release"), "").unwrap();
            released = true;
        }
    }
    assert!(released, "{statuses:?}");
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let ToolState::Completed(done) = &tool_parts(&rt, &parent.id).await[0].1 else {
        panic!("the task completed")
    };
    let summary = done.metadata.summary().expect("the summary is held typed");
    assert_eq!(summary[0].tool, "bash");
    assert_eq!(summary[0].state.status, ToolStatus::Completed);
    assert_eq!(
        done.metadata.to_json()["summary"][0]["state"]["status"],
        "completed"
    );
}
