//! Subagent time limits end to end over real HTTP to the fake OpenAI-compatible server: the
//! hard cap, the idle limit, and the task call's `timeout` argument. The fake's streams are
//! real sockets, so the limits are short configured durations and the tests assert outcomes
//! (which limit fired, what the parent got), never elapsed time; the timer logic itself is
//! tested with a paused clock beside the code (`supervisor::timeout`).

use std::time::Duration;

use serde_json::Value;
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter, Subscription};
use taskforce_testkit::runtime::next_ask;
use taskforce_testkit::script::{bash, is_child, task_call};

use super::delegated_permissions::{approve_once, go, tree};
use super::runtime::{Env, tool_parts};

/// A fake where the parent makes one task call with `args` and the child answers `child()`.
fn one_task(
    args: &'static str,
    child: fn() -> Response,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        if is_child(req) {
            child()
        } else if req.last_role() == Some("user") {
            task_call(args)
        } else {
            Response::text("Noted.")
        }
    }
}

/// A child that writes two words, then stalls forever.
fn stalling() -> Response {
    Response::text("partial words and then nothing").stall_after(3)
}

/// A child that streams 200 words, one every 40 ms, for about eight seconds.
fn slow_and_steady() -> Response {
    Response::text(&"word ".repeat(200)).with_delay(Duration::from_millis(40))
}

const TASK: &str = r#"{"description":"Slow job","prompt":"work","subagent_type":"general"}"#;

async fn run(env: &Env) -> (Runtime, SessionId) {
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        rt.prompt(&s.id, PromptInput::text("go")),
    )
    .await
    .expect("the parent never waits forever")
    .unwrap();
    (rt, s.id)
}

/// The task part's error text and `details`.
async fn task_error(rt: &Runtime, parent: &SessionId) -> (String, Value) {
    let (_, state) = tool_parts(rt, parent)
        .await
        .into_iter()
        .find(|(t, _)| t == "task")
        .expect("a task part");
    let ToolState::Error(e) = state else {
        panic!("the task part should be an error: {state:?}")
    };
    let details = e.metadata.unwrap_or_default().to_json()["details"].clone();
    (e.error, details)
}

/// Asserts the child was cancelled: its last message ended aborted.
async fn child_was_cancelled(rt: &Runtime, parent: &SessionId) {
    let child = rt.children(parent).await.unwrap().remove(0);
    let messages = rt.messages(&child.id).await.unwrap();
    let Message::Assistant(a) = &*messages.last().unwrap().info else {
        panic!("the child's last message is its answer")
    };
    assert_eq!(a.error.as_ref().unwrap().name(), "MessageAbortedError");
}

#[actix_rt::test]
async fn a_stalled_child_hits_the_idle_timeout_with_its_partial_output() {
    let fake = FakeOpenAi::start(one_task(TASK, stalling)).await.unwrap();
    // Long enough for the partial words to arrive on a loaded machine before the stall.
    let env = Env::new(
        &fake.base_url(),
        "[subagent]\ntimeout = \"1h\"\nidle_timeout = \"1s\"\n",
    );
    let (rt, parent) = run(&env).await;
    let (error, details) = task_error(&rt, &parent).await;
    assert!(error.starts_with("SUBAGENT_TIMEOUT: "), "{error}");
    assert!(error.contains("timeoutReason: idle"), "{error}");
    assert!(
        error.contains("partial words"),
        "the model sees the output so far: {error}"
    );
    assert_eq!(details["error"]["code"], "SUBAGENT_TIMEOUT");
    let r = &details["results"][0];
    assert_eq!(r["timeoutReason"], "idle");
    assert_eq!(r["exitCode"], 124);
    assert_eq!(
        r["output"].as_str().map(str::trim_end),
        Some("partial words")
    );
    child_was_cancelled(&rt, &parent).await;
    assert!(fake.wait_for_disconnects(1, Duration::from_secs(5)).await);
}

#[actix_rt::test]
async fn a_slow_but_steady_child_never_idles_but_hits_the_hard_timeout() {
    let fake = FakeOpenAi::start(one_task(TASK, slow_and_steady))
        .await
        .unwrap();
    let env = Env::new(
        &fake.base_url(),
        "[subagent]\ntimeout = \"2s\"\nidle_timeout = \"1s\"\n",
    );
    let (rt, parent) = run(&env).await;
    let (error, details) = task_error(&rt, &parent).await;
    assert!(error.contains("timeoutReason: runtime"), "{error}");
    let r = &details["results"][0];
    assert_eq!(r["timeoutReason"], "runtime");
    assert!(
        r["output"].as_str().unwrap().starts_with("word word "),
        "{r}"
    );
    child_was_cancelled(&rt, &parent).await;
}

#[actix_rt::test]
async fn a_steady_child_slower_than_the_idle_limit_in_total_finishes() {
    fn sixty_words() -> Response {
        Response::text(&"word ".repeat(60)).with_delay(Duration::from_millis(40))
    }
    let fake = FakeOpenAi::start(one_task(TASK, sixty_words))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nidle_timeout = \"1s\"\n");
    let (rt, parent) = run(&env).await;
    let (_, state) = tool_parts(&rt, &parent).await.remove(0);
    assert!(matches!(state, ToolState::Completed(_)), "{state:?}");
}

#[actix_rt::test]
async fn the_timeout_argument_lowers_the_cap() {
    const SHORT: &str =
        r#"{"description":"Slow job","prompt":"work","subagent_type":"general","timeout":0.3}"#;
    let fake = FakeOpenAi::start(one_task(SHORT, stalling)).await.unwrap();
    // Configured: an hour of runtime, an hour of quiet.
    let env = Env::new(
        &fake.base_url(),
        "[subagent]\ntimeout = \"1h\"\nidle_timeout = \"1h\"\n",
    );
    let (rt, parent) = run(&env).await;
    let (error, details) = task_error(&rt, &parent).await;
    assert!(error.contains("limit of 300ms"), "{error}");
    assert_eq!(details["results"][0]["timeoutReason"], "runtime");
    child_was_cancelled(&rt, &parent).await;
}

#[actix_rt::test]
async fn the_timeout_argument_cannot_raise_the_cap() {
    const LONG: &str =
        r#"{"description":"Slow job","prompt":"work","subagent_type":"general","timeout":3600}"#;
    let fake = FakeOpenAi::start(one_task(LONG, stalling)).await.unwrap();
    let env = Env::new(
        &fake.base_url(),
        "[subagent]\ntimeout = \"300ms\"\nidle_timeout = \"1h\"\n",
    );
    let (rt, parent) = run(&env).await;
    let (error, details) = task_error(&rt, &parent).await;
    assert!(error.contains("limit of 300ms"), "{error}");
    assert_eq!(details["results"][0]["timeoutReason"], "runtime");
}

#[actix_rt::test]
async fn a_non_positive_timeout_argument_is_invalid_input() {
    const BAD: &str =
        r#"{"description":"Slow job","prompt":"work","subagent_type":"general","timeout":0}"#;
    let fake = FakeOpenAi::start(one_task(BAD, stalling)).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (rt, parent) = run(&env).await;
    let (error, _) = task_error(&rt, &parent).await;
    assert!(
        error.starts_with("INVALID_INPUT: timeout must be"),
        "{error}"
    );
    assert!(rt.children(&parent).await.unwrap().is_empty());
}

#[actix_rt::test]
async fn the_hard_timeout_ends_a_child_waiting_on_a_permission_ask_and_leaves_no_ask_behind() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::tool_calls(&[("call_sh", "bash", r#"{"command":"ls"}"#)])
        } else if req.last_role() == Some("user") {
            task_call(TASK)
        } else {
            Response::text("Noted.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(
        &fake.base_url(),
        // The idle limit leaves the child time to ask on a loaded machine; the hard cap is
        // three of them.
        "[permission]\nbash = \"ask\"\n[subagent]\ntimeout = \"3s\"\nidle_timeout = \"1s\"\n",
    );
    let (rt, parent) = run(&env).await;
    let (error, _) = task_error(&rt, &parent).await;
    assert!(error.starts_with("SUBAGENT_TIMEOUT: "), "{error}");
    // Waiting for a person is not idling: the hard cap ends it, not the idle limit.
    assert!(error.contains("timeoutReason: runtime"), "{error}");
    assert!(
        rt.pending_permissions().await.is_empty(),
        "{:?}",
        rt.pending_permissions().await
    );
    // The child's call that waited on the ask ended, not left running.
    let child = rt.children(&parent).await.unwrap().remove(0);
    let parts = tool_parts(&rt, &child.id).await;
    assert!(
        parts.iter().all(|(_, s)| matches!(s, ToolState::Error(_))),
        "{parts:?}"
    );
    child_was_cancelled(&rt, &parent).await;
}

/// Waits up to `within` for `session` to end its run (idle or failed); answers whether it did.
async fn ends_within(events: &mut Subscription, session: &SessionId, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Err(_) => return false,
            Ok(Some(BusItem::Event(e))) => match &e.event {
                Event::SessionIdle { session_id } if session_id == session => return true,
                Event::SessionError {
                    session_id: Some(s),
                    ..
                } if s == session => return true,
                _ => {}
            },
            Ok(Some(BusItem::Lagged(_))) => {}
            Ok(None) => return true,
        }
    }
}

#[actix_rt::test]
async fn a_child_waiting_for_a_permission_reply_is_not_idle() {
    let fake = FakeOpenAi::start(tree(1, || bash("echo after-the-wait")))
        .await
        .unwrap();
    // The idle limit leaves the child time to ask on a loaded machine.
    let config =
        "[permission]\nbash = \"ask\"\n[subagent]\ntimeout = \"1h\"\nidle_timeout = \"1s\"\n";
    let env = Env::new(&fake.base_url(), config);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
    let running = go(&rt, &root.id, PromptInput::text("go"));
    let request = next_ask(&mut events).await;
    let child = request.session_id.clone();
    // Three idle limits pass with the ask unanswered: the child is still there, waiting.
    assert!(
        !ends_within(&mut events, &child, Duration::from_secs(3)).await,
        "a child waiting for a person was ended as idle"
    );
    let output = approve_once(&rt, &request, running, &child).await;
    assert!(output.contains("after-the-wait"), "{output}");
    let ToolState::Completed(task) = &tool_parts(&rt, &root.id).await[0].1 else {
        panic!("the task completed")
    };
    assert!(task.output.starts_with("level 1 done"), "{}", task.output);
}
