//! What a child's output looks like to its parent: secrets and the home directory redacted,
//! long output cut for the model but kept whole in the envelope, and the child's tool titles
//! redacted in the parent's summary.

use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::Runtime;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{PartKind, ToolState};
use taskforce_agents::tool::{TaskEnvelope, TaskErrorCode};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{is_child, task_call};

use super::{GENERAL, prompt, task_state};
use crate::suite::runtime::{Env, tool_parts};

const OPENAI_KEY: &str = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
const GITHUB_TOKEN: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";

/// A child answer with secrets and the home directory on its first line, then `lines` lines.
fn leaky_answer(home: &str, lines: usize) -> String {
    let mut text = format!(
        "Found {OPENAI_KEY} and {GITHUB_TOKEN} in {home}/project/.env\nexport DB_PASSWORD=hunter2"
    );
    for i in 0..lines {
        text.push_str(&format!("\nline {i}"));
    }
    text
}

/// Runs a delegation whose child answers [`leaky_answer`]; the `Env` keeps the project alive.
async fn leaky_run(lines: usize) -> (FakeOpenAi, Runtime, SessionId, String, Env) {
    // The home directory is only known once the runtime is up; the model reads it from there.
    let home = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let model_home = home.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            let home = model_home.lock().unwrap().clone();
            Response::text(&leaky_answer(&home, lines))
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("Done.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let h = rt.paths().home.clone().unwrap().display().to_string();
    *home.lock().unwrap() = h.clone();
    let parent = prompt(&rt, "go").await;
    (fake, rt, parent, h, env)
}

#[actix_rt::test]
async fn child_output_is_redacted_before_it_reaches_the_parent() {
    let (fake, rt, parent, home, _env) = leaky_run(3).await;
    let ToolState::Completed(done) = task_state(&rt, &parent).await else {
        panic!("the task completed")
    };
    for leak in [OPENAI_KEY, GITHUB_TOKEN, "hunter2", home.as_str()] {
        assert!(
            !done.output.contains(leak),
            "{leak} leaked: {}",
            done.output
        );
    }
    assert!(
        done.output.starts_with(
            "Found [REDACTED] and [REDACTED] in ~/project/.env\nexport DB_PASSWORD=[REDACTED]\nline 0"
        ),
        "{}",
        done.output
    );
    assert_eq!(done.metadata["truncated"], false);
    let envelope = TaskEnvelope::from_metadata(&done.metadata).unwrap();
    assert!(envelope.error.is_none());
    let output = envelope.results[0].output.clone().unwrap();
    assert!(!output.contains(OPENAI_KEY) && output.contains("~/project/.env"));
    for item in envelope.results[0].display_items.as_ref().unwrap() {
        assert!(!format!("{item:?}").contains(OPENAI_KEY), "{item:?}");
    }
    // The parent's model never saw the secrets.
    let second = fake
        .requests()
        .into_iter()
        .filter(|r| !is_child(r))
        .nth(1)
        .unwrap();
    assert!(!second.contains(OPENAI_KEY) && !second.contains(GITHUB_TOKEN));
    assert!(second.contains("[REDACTED]"));
    // The child's own stored answer is not rewritten.
    let child = rt.children(&parent).await.unwrap().remove(0);
    let stored: String = rt
        .messages(&child.id)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_text().map(|t| t.text.clone()))
        .collect();
    assert!(stored.contains(OPENAI_KEY), "{stored}");
}

#[actix_rt::test]
async fn long_child_output_is_cut_for_the_model_and_kept_whole_in_details() {
    let (fake, rt, parent, _, _env) = leaky_run(2500).await;
    let child = rt.children(&parent).await.unwrap().remove(0);
    let ToolState::Completed(done) = task_state(&rt, &parent).await else {
        panic!("the task completed")
    };
    assert_eq!(done.metadata["truncated"], true);
    assert!(
        done.output.lines().count() < 2020,
        "{}",
        done.output.lines().count()
    );
    assert!(done.output.contains("line 1997"));
    assert!(!done.output.contains("line 2400"));
    assert!(done.output.contains("SUBAGENT_OUTPUT_TRUNCATED"));
    assert!(done.output.contains(&format!("session_id: {}", child.id)));
    assert!(!done.output.contains(OPENAI_KEY));

    let envelope = TaskEnvelope::from_metadata(&done.metadata).unwrap();
    let error = envelope.error.unwrap();
    assert_eq!(error.code, TaskErrorCode::SubagentOutputTruncated);
    assert!(error.message.contains(&child.id.to_string()));
    let r = &envelope.results[0];
    assert_eq!(r.exit_code, 0);
    let output = r.output.as_deref().unwrap();
    assert_eq!(output.lines().count(), 2502);
    assert!(output.ends_with("line 2499"));
    assert!(!output.contains(OPENAI_KEY));

    // The parent's model got the cut copy.
    let second = fake
        .requests()
        .into_iter()
        .filter(|r| !is_child(r))
        .nth(1)
        .unwrap();
    assert!(second.contains("SUBAGENT_OUTPUT_TRUNCATED"));
    assert!(!second.contains("line 2499"));
}

#[actix_rt::test]
async fn a_childs_tool_titles_are_redacted_in_the_parents_summary() {
    // The child runs a command with a key in it (a bash call's title is its command).
    let command = format!(r#"{{"command":"echo {OPENAI_KEY} > /dev/null"}}"#);
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("call_sh", "bash", command.as_str())])
            } else {
                Response::text("ran it")
            }
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("Done.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "[permission]\nbash = \"allow\"\n");
    let rt = env.runtime().await;
    let mut events = rt.subscribe(Filter::All);
    let parent = prompt(&rt, "go").await;
    let ToolState::Completed(done) = task_state(&rt, &parent).await else {
        panic!("the task completed")
    };
    let summary = done.metadata.to_json()["summary"].to_string();
    assert!(summary.contains("echo [REDACTED]"), "{summary}");
    // Nor did any live update of the parent's part carry it.
    let mut seen = 0;
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(100), events.next()).await
    {
        if let Event::PartUpdated { part, .. } = &e.event
            && part.session_id == parent
            && let PartKind::Tool(tool) = &part.kind
        {
            seen += 1;
            let shown = format!("{:?}", tool.state);
            assert!(!shown.contains(OPENAI_KEY), "{shown}");
        }
    }
    assert!(seen > 0);
    // The child's own part keeps the command it ran.
    let child = rt.children(&parent).await.unwrap().remove(0);
    let (_, state) = tool_parts(&rt, &child.id).await.remove(0);
    assert!(format!("{state:?}").contains(OPENAI_KEY));
}
