//! The task tool's parallel form (`tasks: [...]`) end to end over real HTTP to the fake
//! OpenAI-compatible server.

use std::time::Duration;

use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolState;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{is_child, task_call};

use super::runtime::{Env, tool_parts};

const THREE: &str = r#"{"tasks":[
    {"description":"part one","prompt":"look at part 1","subagent_type":"explore"},
    {"description":"part two","prompt":"look at part 2","subagent_type":"explore"},
    {"description":"part three","prompt":"look at part 3","subagent_type":"general"}]}"#;

/// A fake whose parent makes one task call with `args`; children answer after `child`.
fn parallel(
    args: &str,
    child: fn(&RecordedRequest) -> Response,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    let args = args.replace('\n', "");
    move |req| {
        if is_child(req) {
            child(req)
        } else if req.last_role() == Some("user") {
            task_call(&args)
        } else {
            Response::text("merged")
        }
    }
}

/// Each child names its part, slowly enough to overlap.
fn answer_part(req: &RecordedRequest) -> Response {
    let part = (1..=3)
        .find(|i| req.contains(&format!("look at part {i}")))
        .unwrap_or(0);
    Response::text(&format!("findings for part {part} are in"))
        .with_delay(Duration::from_millis(30))
}

async fn run(env: &Env) -> (Runtime, SessionId) {
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        rt.prompt(&s.id, PromptInput::text("fan out")),
    )
    .await
    .expect("the parent never waits forever")
    .unwrap();
    (rt, s.id)
}

#[actix_rt::test]
async fn three_tasks_in_one_call_run_at_once_and_all_answer() {
    let fake = FakeOpenAi::start(parallel(THREE, answer_part))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (rt, parent) = run(&env).await;

    assert_eq!(fake.peak_active(), 3, "the three children streamed at once");
    let children = rt.children(&parent).await.unwrap();
    assert_eq!(children.len(), 3);
    let (_, state) = tool_parts(&rt, &parent).await.remove(0);
    let ToolState::Completed(done) = &state else {
        panic!("the call completed: {state:?}")
    };
    let metadata = done.metadata.to_json();
    let details = &metadata["details"];
    assert_eq!(details["mode"], "parallel");
    let results = details["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for (i, (r, name)) in results.iter().zip(["one", "two", "three"]).enumerate() {
        let n = i + 1;
        assert_eq!(r["exitCode"], 0);
        assert_eq!(r["task"], format!("look at part {n}"));
        assert!(r["usage"]["turns"].as_u64().unwrap() >= 1);
        let session = r["sessionId"].as_str().unwrap();
        assert!(children.iter().any(|c| c.id == session));
        let block = format!(
            "## part {name}\nfindings for part {n} are in\n\n<task_metadata>\nsession_id: {session}\n</task_metadata>"
        );
        assert!(done.output.contains(&block), "{}", done.output);
    }
    assert_eq!(results[2]["agent"], "general");
    assert!(details.get("error").is_none(), "{details}");
    // The model read every block.
    assert!(fake.requests().last().unwrap().contains("## part three"));
}

#[actix_rt::test]
async fn one_failing_task_does_not_fail_the_others() {
    fn one_fails(req: &RecordedRequest) -> Response {
        if req.contains("look at part 2") {
            Response::error(400, "part two exploded")
        } else {
            answer_part(req)
        }
    }
    let fake = FakeOpenAi::start(parallel(THREE, one_fails)).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (rt, parent) = run(&env).await;

    let (_, state) = tool_parts(&rt, &parent).await.remove(0);
    let ToolState::Completed(done) = &state else {
        panic!("the call completed: {state:?}")
    };
    let metadata = done.metadata.to_json();
    let results = metadata["details"]["results"].as_array().unwrap();
    let codes: Vec<i64> = results
        .iter()
        .map(|r| r["exitCode"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, vec![0, 1, 0]);
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("part two exploded")
    );
    assert!(done.output.contains("findings for part 1 are in"));
    assert!(done.output.contains("findings for part 3 are in"));
    assert!(
        done.output.contains("## part two\nSUBAGENT_FAILED: "),
        "{}",
        done.output
    );
}

#[actix_rt::test]
async fn malformed_parallel_calls_are_invalid_input_and_start_nothing() {
    const ONE: &str = r#"{"description":"a","prompt":"b","subagent_type":"general"}"#;
    let cases = [
        (
            format!(
                r#"{{"description":"x","prompt":"y","subagent_type":"general","tasks":[{ONE}]}}"#
            ),
            "INVALID_INPUT: pass either tasks or description/prompt/subagent_type, not both (description",
        ),
        (
            format!(r#"{{"tasks":[{ONE}],"background":true}}"#),
            "INVALID_INPUT: background is not supported with tasks",
        ),
        (
            r#"{"tasks":[]}"#.to_string(),
            "INVALID_INPUT: tasks must name at least one task",
        ),
    ];
    for (args, expected) in cases {
        let fake = FakeOpenAi::start(parallel(&args, answer_part))
            .await
            .unwrap();
        let env = Env::new(&fake.base_url(), "");
        let (rt, parent) = run(&env).await;
        let (_, state) = tool_parts(&rt, &parent).await.remove(0);
        let ToolState::Error(e) = &state else {
            panic!("{args}: the call failed: {state:?}")
        };
        assert!(e.error.starts_with(expected), "{args}: {}", e.error);
        let metadata = e.metadata.as_ref().unwrap().to_json();
        assert_eq!(metadata["details"]["mode"], "parallel", "{args}");
        assert_eq!(
            metadata["details"]["error"]["code"], "INVALID_INPUT",
            "{args}"
        );
        assert!(rt.children(&parent).await.unwrap().is_empty(), "{args}");
    }
}

#[actix_rt::test]
async fn parallel_tasks_wait_for_the_concurrency_limit() {
    let fake = FakeOpenAi::start(parallel(THREE, answer_part))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_concurrent = 1\n");
    let (rt, parent) = run(&env).await;
    assert_eq!(fake.peak_active(), 1);
    assert_eq!(rt.children(&parent).await.unwrap().len(), 3);
    let (_, state) = tool_parts(&rt, &parent).await.remove(0);
    assert!(matches!(state, ToolState::Completed(_)), "{state:?}");
}
