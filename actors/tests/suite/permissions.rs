//! Permission asks end to end: real sessions, a fake OpenAI-compatible model that calls `bash`
//! (configured as `ask`), and replies through the runtime.

use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter, Subscription};
use taskforce_actors::permission::PermissionReply;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolState;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::next_ask;
use taskforce_testkit::script::{bash, call_then, delegating, is_child, last_user_text};
use tokio::task::JoinHandle;

use super::runtime::{Env, tool_parts};

const ASK_BASH: &str = "[permission]\nbash = \"ask\"\n";

/// A model that runs `bash` with `command` on a user turn and then answers with `answer`.
fn bash_then(
    command: &'static str,
    answer: &'static str,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    call_then(bash(command), answer)
}

fn bash_args(command: &str) -> String {
    serde_json::json!({"command": command, "description": "run it"}).to_string()
}

/// Prompts `session` in the background.
fn prompt(
    rt: &Runtime,
    session: &SessionId,
    text: &str,
) -> JoinHandle<Result<MessageWithParts, RuntimeError>> {
    let (rt, id, input) = (rt.clone(), session.clone(), PromptInput::text(text));
    tokio::spawn(async move { rt.prompt(&id, input).await })
}

async fn finished(running: JoinHandle<Result<MessageWithParts, RuntimeError>>) -> MessageWithParts {
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the prompt was answered")
        .unwrap()
        .unwrap()
}

/// Every event still buffered, after a short wait.
async fn drain(events: &mut Subscription) -> Vec<Event> {
    let mut seen = Vec::new();
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(200), events.next()).await
    {
        seen.push(e.event.clone());
    }
    seen
}

fn asks(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::PermissionAsked(_)))
        .count()
}

fn text(message: &MessageWithParts) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.clone()))
        .collect()
}

#[actix_rt::test]
async fn once_runs_the_call_and_asks_again_next_time() {
    let fake = FakeOpenAi::start(bash_then("echo once-ran", "done"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), ASK_BASH);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    for turn in ["first", "second"] {
        let running = prompt(&rt, &s.id, turn);
        let request = next_ask(&mut events).await;
        assert_eq!(request.session_id, s.id);
        assert_eq!(request.root_session_id, s.id);
        assert_eq!(request.path, ["build"]);
        assert_eq!(request.patterns, ["echo once-ran"]);
        assert_eq!(
            rt.pending_permissions().await,
            std::slice::from_ref(&request)
        );
        assert!(
            rt.reply_permission(&request.id, PermissionReply::Once, None)
                .await
        );
        assert_eq!(text(&finished(running).await), "done", "{turn}");
    }
    let parts = tool_parts(&rt, &s.id).await;
    assert_eq!(parts.len(), 2);
    for (_, state) in parts {
        let ToolState::Completed(done) = state else {
            panic!("the call ran: {state:?}")
        };
        assert!(done.output.contains("once-ran"), "{}", done.output);
    }
}

#[actix_rt::test]
async fn a_plain_reject_stops_the_loop_and_rejects_the_sessions_other_asks() {
    let fake = FakeOpenAi::start(|req| {
        if req.last_role() == Some("user") {
            Response::tool_calls(&[
                ("call_a", "bash", &bash_args("echo a")),
                ("call_b", "bash", &bash_args("echo b")),
            ])
        } else {
            Response::text("the model carried on")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), ASK_BASH);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    let running = prompt(&rt, &s.id, "run both");
    let first = next_ask(&mut events).await;
    let second = next_ask(&mut events).await;
    assert!(
        rt.reply_permission(&first.id, PermissionReply::Reject, None)
            .await
    );
    let answer = finished(running).await;

    // The loop stopped: the model was called once and never saw the rejection.
    assert_eq!(fake.requests().len(), 1);
    assert_ne!(text(&answer), "the model carried on");
    let replied: Vec<_> = drain(&mut events)
        .await
        .into_iter()
        .filter_map(|e| match e {
            Event::PermissionReplied {
                request_id, reply, ..
            } => Some((request_id, reply)),
            _ => None,
        })
        .collect();
    assert_eq!(
        replied,
        [
            (first.id, PermissionReply::Reject),
            (second.id, PermissionReply::Reject)
        ]
    );
    assert!(rt.pending_permissions().await.is_empty());
    let parts = tool_parts(&rt, &s.id).await;
    assert_eq!(parts.len(), 2);
    for (_, state) in parts {
        let ToolState::Error(e) = state else {
            panic!("the call was refused: {state:?}")
        };
        assert_eq!(
            e.error,
            "The user rejected permission to use this specific tool call."
        );
    }
}

#[actix_rt::test]
async fn a_reject_with_a_message_is_shown_to_the_model_and_the_loop_goes_on() {
    let fake = FakeOpenAi::start(|req| {
        if req.last_role() == Some("user") {
            Response::tool_calls(&[("call_bash", "bash", &bash_args("rm -rf build"))])
        } else if req.contains("use cargo clean instead") {
            Response::text("understood, using cargo clean")
        } else {
            Response::text("the feedback was lost")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), ASK_BASH);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    let running = prompt(&rt, &s.id, "clean up");
    let request = next_ask(&mut events).await;
    let feedback = Some("use cargo clean instead".to_string());
    assert!(
        rt.reply_permission(&request.id, PermissionReply::Reject, feedback)
            .await
    );
    let answer = finished(running).await;
    assert_eq!(text(&answer), "understood, using cargo clean");
    assert_eq!(fake.requests().len(), 2);
    let ToolState::Error(e) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("the call was refused")
    };
    assert_eq!(
        e.error,
        "The user rejected permission to use this specific tool call with the following feedback: use cargo clean instead"
    );
}

#[actix_rt::test]
async fn unknown_and_repeated_replies_are_refused_without_events() {
    let fake = FakeOpenAi::start(bash_then("echo x", "done"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), ASK_BASH);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::All);
    let unknown = taskforce_agents::id::PermissionId::new();
    assert!(
        !rt.reply_permission(&unknown, PermissionReply::Once, None)
            .await
    );
    let running = prompt(&rt, &s.id, "go");
    let request = next_ask(&mut events).await;
    assert!(
        rt.reply_permission(&request.id, PermissionReply::Once, None)
            .await
    );
    finished(running).await;
    drain(&mut events).await;
    for reply in [
        PermissionReply::Once,
        PermissionReply::Always,
        PermissionReply::Reject,
    ] {
        assert!(
            !rt.reply_permission(&request.id, reply, None).await,
            "{reply:?}"
        );
    }
    let late = drain(&mut events).await;
    assert!(
        !late
            .iter()
            .any(|e| matches!(e, Event::PermissionReplied { .. })),
        "{late:?}"
    );
}

#[actix_rt::test]
async fn always_holds_for_other_sessions_after_a_restart_and_only_in_its_project() {
    let fake = FakeOpenAi::start(bash_then("echo approved", "done"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), ASK_BASH);
    {
        let rt = env.runtime().await;
        let s = rt.create_session(None, None).await.unwrap();
        let mut events = rt.subscribe(Filter::All);
        let running = prompt(&rt, &s.id, "go");
        let request = next_ask(&mut events).await;
        assert_eq!(request.always, ["echo *"]);
        assert!(
            rt.reply_permission(&request.id, PermissionReply::Always, None)
                .await
        );
        finished(running).await;
        // Another session of the same runtime runs it without asking.
        let other = rt.create_session(None, None).await.unwrap();
        finished(prompt(&rt, &other.id, "go")).await;
        assert_eq!(asks(&drain(&mut events).await), 0);
    }

    // A new runtime on the same data directory still has the approval.
    let rt = env.runtime().await;
    let mut events = rt.subscribe(Filter::All);
    let s = rt.create_session(None, None).await.unwrap();
    assert_eq!(text(&finished(prompt(&rt, &s.id, "go")).await), "done");
    assert_eq!(asks(&drain(&mut events).await), 0);
    let ToolState::Completed(done) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("the approved call ran")
    };
    assert!(done.output.contains("approved"), "{}", done.output);
    drop(rt);

    // Another project sharing the data directory is asked.
    let rt = Runtime::start(env.neighbour_options()).await.unwrap();
    let mut events = rt.subscribe(Filter::All);
    let s = rt.create_session(None, None).await.unwrap();
    let running = prompt(&rt, &s.id, "go");
    let request = next_ask(&mut events).await;
    assert!(
        rt.reply_permission(&request.id, PermissionReply::Reject, None)
            .await
    );
    finished(running).await;
}

#[actix_rt::test]
async fn a_childs_ask_reaches_the_roots_subscriber_with_its_path() {
    let parent_model = delegating(
        r#"{"description":"Look","prompt":"list files","subagent_type":"explore"}"#,
        "unused",
        "the parent is done",
    );
    let fake = FakeOpenAi::start(move |req| {
        if is_child(req) && req.last_role() == Some("user") {
            Response::tool_calls(&[("call_ls", "bash", &bash_args("echo from-child"))])
        } else if is_child(req) {
            Response::text("the child listed the files")
        } else {
            parent_model(req)
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), ASK_BASH);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
    let running = prompt(&rt, &root.id, "what is here?");
    let request = next_ask(&mut events).await;

    let child = rt.children(&root.id).await.unwrap().remove(0);
    assert_eq!(request.session_id, child.id);
    assert_eq!(request.root_session_id, root.id);
    assert_eq!(request.path, ["build", "explore"]);
    let json = serde_json::to_value(&request).unwrap();
    assert_eq!(json["sessionID"], child.id.as_str());
    assert_eq!(json["rootSessionID"], root.id.as_str());
    assert_eq!(json["path"], serde_json::json!(["build", "explore"]));

    assert!(
        rt.reply_permission(&request.id, PermissionReply::Once, None)
            .await
    );
    assert_eq!(text(&finished(running).await), "the parent is done");
    let ToolState::Completed(ran) = &tool_parts(&rt, &child.id).await[0].1 else {
        panic!("the child's call ran")
    };
    assert!(ran.output.contains("from-child"), "{}", ran.output);
    let ToolState::Completed(task) = &tool_parts(&rt, &root.id).await[0].1 else {
        panic!("the task completed")
    };
    assert!(task.output.starts_with("the child listed the files"));
}

#[actix_rt::test]
async fn grep_leaves_out_files_the_read_rules_ask_about_until_the_user_allows_reading() {
    let fake = FakeOpenAi::start(|req| {
        if req.last_role() != Some("user") {
            Response::text("done")
        } else if last_user_text(req).contains("read it") {
            Response::tool_calls(&[("call_read", "read", r#"{"filePath":".env"}"#)])
        } else {
            Response::tool_calls(&[("call_grep", "grep", r#"{"pattern":"SECRET"}"#)])
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(".env", "SECRET=hunter2\n");
    env.file("docs.txt", "SECRET is documented here\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));

    finished(prompt(&rt, &s.id, "search")).await;
    let ToolState::Completed(grep) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("grep ran")
    };
    assert!(
        grep.output.contains("SECRET is documented here"),
        "{}",
        grep.output
    );
    assert!(!grep.output.contains("hunter2"), "{}", grep.output);
    assert!(
        grep.output
            .contains("(1 file skipped: reading it needs the user's permission"),
        "{}",
        grep.output
    );
    assert_eq!(asks(&drain(&mut events).await), 0);

    // Reading `.env` asks; "always" allows reading from then on, and grep follows suit.
    let running = prompt(&rt, &s.id, "read it");
    let request = next_ask(&mut events).await;
    assert_eq!(request.permission, "read");
    assert!(
        rt.reply_permission(&request.id, PermissionReply::Always, None)
            .await
    );
    finished(running).await;
    finished(prompt(&rt, &s.id, "search again")).await;
    let ToolState::Completed(grep) = &tool_parts(&rt, &s.id).await[2].1 else {
        panic!("grep ran again")
    };
    assert!(grep.output.contains("SECRET=hunter2"), "{}", grep.output);
    assert!(!grep.output.contains("skipped"), "{}", grep.output);
}
