//! Background subagents end to end: `task {background: true}`, the `<task_result>` delivery into
//! the parent, `task_status`, `task_cancel`, cancel propagation and delivery across a restart.

use std::time::Duration;

use taskforce_actors::store::{SqliteStore, Store};
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, ToolState};
use taskforce_agents::tool::background::EXIT_RUNNING;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::{until, until_first_child_runs, until_idle};
use taskforce_testkit::script::{is_child, last_content, task_call, tool_results};

use super::runtime::{Env, tool_parts};

pub(super) const BACKGROUND: &str =
    r#"{"description":"Dig","prompt":"Dig deep","subagent_type":"general","background":true}"#;

/// The first `ses_…` id in `text`.
pub(super) fn session_in(text: &str) -> Option<String> {
    let at = text.find("ses_")?;
    Some(
        text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect(),
    )
}

/// The child id named in `req`'s first tool result (the background task's answer).
pub(super) fn child_in(req: &RecordedRequest) -> String {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .find_map(|m| m["content"].as_str().and_then(session_in))
        .unwrap_or_default()
}

pub(super) fn call(id: &str, tool: &str, args: String) -> Response {
    Response::tool_calls(&[(id, tool, args.as_str())])
}

/// Waits until `check` holds on `session`'s messages.
pub(super) async fn wait_for_messages(
    rt: &Runtime,
    session: &SessionId,
    what: &str,
    check: impl Fn(&[taskforce_actors::store::MessageWithParts]) -> bool,
) {
    let check = &check;
    until(rt, what, |rt| async move {
        check(&rt.messages(session).await.unwrap())
    })
    .await;
}

/// The synthetic `<task_result>` texts of `messages`' user messages.
pub(super) fn deliveries(messages: &[taskforce_actors::store::MessageWithParts]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_text())
        .filter(|t| t.synthetic == Some(true) && t.text.starts_with("<task_result "))
        .map(|t| t.text.clone())
        .collect()
}

fn last_assistant_text(messages: &[taskforce_actors::store::MessageWithParts]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| matches!(*m.info, Message::Assistant(_)))
        .map(|m| {
            m.parts
                .iter()
                .filter_map(|p| p.as_text().map(|t| t.text.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The outputs (or error texts) of `session`'s `tool` parts, in order.
pub(super) async fn outputs_of(rt: &Runtime, session: &SessionId, tool: &str) -> Vec<String> {
    tool_parts(rt, session)
        .await
        .into_iter()
        .filter(|(t, _)| t == tool)
        .map(|(_, state)| match state {
            ToolState::Completed(c) => c.output,
            ToolState::Error(e) => e.error,
            other => format!("<{}>", other.status()),
        })
        .collect()
}

#[actix_rt::test]
async fn background_returns_at_once_and_the_result_starts_a_parent_turn() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("the child found gold").with_delay(Duration::from_millis(150))
        } else if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
            if tool_results(req) == 1 {
                call(
                    "call_status",
                    "task_status",
                    format!(r#"{{"session_id":"{}"}}"#, child_in(req)),
                )
            } else {
                Response::text("unexpected")
            }
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else if tool_results(req) == 1 {
            Response::text("started it")
        } else {
            Response::text("the parent read the result")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let first = rt
        .prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    assert_eq!(
        last_assistant_text(std::slice::from_ref(&first)),
        "started it"
    );

    // The task call returned while the child still runs (its row is stored with its first
    // message, which may come after the parent's answer).
    let child = until_first_child_runs(&rt, &parent.id).await;
    let state = tool_parts(&rt, &parent.id)
        .await
        .into_iter()
        .find(|(t, _)| t == "task")
        .map(|(_, s)| s)
        .unwrap();
    let ToolState::Completed(done) = state else {
        panic!("the background call completes at once: {state:?}")
    };
    assert!(
        done.output.contains("running in the background"),
        "{}",
        done.output
    );
    assert!(done.output.contains(&format!("session_id: {}", child.id)));
    assert_eq!(done.metadata["background"], true);
    assert_eq!(done.metadata["status"], "running");
    assert_eq!(
        done.metadata.to_json()["details"]["results"][0]["exitCode"],
        EXIT_RUNNING
    );

    // The child's end starts a parent turn on the delivered result.
    wait_for_messages(&rt, &parent.id, "the parent's answer to the result", |m| {
        last_assistant_text(m) == "the parent read the result"
    })
    .await;
    let messages = rt.messages(&parent.id).await.unwrap();
    let delivered = deliveries(&messages);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].starts_with(&format!(
        "<task_result session_id=\"{}\" status=\"completed\">",
        child.id
    )));
    assert!(delivered[0].contains("the child found gold"));
    let seen = fake
        .requests()
        .iter()
        .filter(|r| !is_child(r))
        .any(|r| r.contains("<task_result session_id=") && r.contains("the child found gold"));
    assert!(seen, "the parent's model was sent the result");

    // task_status after the end: completed, with the output and the child's usage.
    let status = outputs_of(&rt, &parent.id, "task_status").await;
    assert_eq!(status.len(), 1, "{status:?}");
    assert!(status[0].contains("status=\"completed\""), "{}", status[0]);
    assert!(status[0].contains("the child found gold"), "{}", status[0]);
    assert!(status[0].contains("1 turns"), "{}", status[0]);
}

#[actix_rt::test]
async fn a_result_arriving_while_the_parent_is_busy_is_picked_up_by_its_loop() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("quick child answer")
        } else if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
            Response::text("picked it up")
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else {
            // The parent keeps streaming while the child finishes.
            Response::text("a slow parent answer that takes a while to stream")
                .with_delay(Duration::from_millis(150))
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let last = tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&parent.id, PromptInput::text("go")),
    )
    .await
    .unwrap()
    .unwrap();
    // The same loop ran on into the delivered result.
    assert_eq!(
        last_assistant_text(std::slice::from_ref(&last)),
        "picked it up"
    );
    let messages = rt.messages(&parent.id).await.unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| match *m.info {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
        })
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "assistant", "user", "assistant"]
    );
    assert_eq!(deliveries(&messages).len(), 1);
}

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
async fn cancelling_the_parent_cancels_its_background_child() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("never finishing").stall_after(2)
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else {
            Response::text("launched")
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
    let child = rt.children(&parent.id).await.unwrap().remove(0);
    assert!(rt.statuses().contains_key(&child.id));

    rt.cancel(&parent.id).await.unwrap();
    // The cancelled result is recorded in the idle parent without starting a turn.
    wait_for_messages(&rt, &parent.id, "the cancelled result", |m| {
        deliveries(m)
            .iter()
            .any(|d| d.contains("status=\"cancelled\""))
    })
    .await;
    assert!(!rt.statuses().contains_key(&child.id), "the child stopped");
    let turns = fake
        .requests()
        .iter()
        .filter(|r| !is_child(r) && r.contains("<task_result "))
        .count();
    assert_eq!(turns, 0, "a cancelled result does not start a turn");
}

#[actix_rt::test]
async fn an_undelivered_result_is_delivered_after_a_restart() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("child finished its work").with_delay(Duration::from_millis(100))
        } else if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
            Response::text("resumed and saw it")
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else {
            // The first runtime's parent hangs in this turn: the result cannot reach it.
            Response::text("waiting forever").stall_after(1)
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let parent = {
        let rt = env.runtime().await;
        let parent = rt.create_session(None, None).await.unwrap();
        rt.prompt_async(&parent.id, PromptInput::text("go"))
            .await
            .unwrap();
        let store = SqliteStore::open(&rt.paths().data_dir).await.unwrap();
        let store = &store;
        until(&rt, "the child's recorded result", |_| async move {
            let pending = store.undelivered_background().await.unwrap();
            pending.iter().any(|t| t.result.is_some())
        })
        .await;
        store.close().await;
        assert!(deliveries(&rt.messages(&parent.id).await.unwrap()).is_empty());
        // The first runtime stops (as its process would), its parent still mid-turn.
        rt.shutdown().await;
        let after = rt
            .prompt_async(&parent.id, PromptInput::text("again"))
            .await;
        assert!(
            matches!(after, Err(taskforce_actors::RuntimeError::Stopped)),
            "{after:?}"
        );
        parent.id
    };

    // A new runtime on the same data directory delivers it and the parent answers.
    let rt = env.runtime().await;
    wait_for_messages(&rt, &parent, "the delivery after the restart", |m| {
        last_assistant_text(m) == "resumed and saw it"
    })
    .await;
    let messages = rt.messages(&parent).await.unwrap();
    let delivered = deliveries(&messages);
    assert_eq!(delivered.len(), 1);
    assert!(delivered[0].contains("status=\"completed\""));
    assert!(delivered[0].contains("child finished its work"));
    let store = SqliteStore::open(&rt.paths().data_dir).await.unwrap();
    let store = &store;
    until(&rt, "the record marked delivered", |_| async move {
        store.undelivered_background().await.unwrap().is_empty()
    })
    .await;
}

#[actix_rt::test]
async fn a_second_runtime_leaves_a_live_runtimes_background_child_alone() {
    let fake = answering_fake().await;
    let env = Env::new(&fake.base_url(), "");
    let first = env.runtime().await;
    let parent = first.create_session(None, None).await.unwrap();
    first
        .prompt_async(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    until(&first, "the child's model request", |_| async {
        fake.requests().iter().any(is_child)
    })
    .await;

    // Another runtime on the same data directory, while the first one runs the child: the
    // child's runtime is alive, so its record stays as it is.
    let second = env.runtime().await;
    let store = SqliteStore::open(&second.paths().data_dir).await.unwrap();
    let records = store.undelivered_background().await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(records[0].result.is_none(), "{:?}", records[0].result);
    store.close().await;

    // The first runtime finishes the child and delivers its real result, once.
    wait_for_messages(&first, &parent.id, "the child's result", |m| {
        last_assistant_text(m) == "saw the result"
    })
    .await;
    let delivered = deliveries(&first.messages(&parent.id).await.unwrap());
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(
        delivered[0].contains("status=\"completed\""),
        "{delivered:?}"
    );
    assert!(delivered[0].contains("child finished its work"));
}

#[actix_rt::test]
async fn pending_work_follows_a_background_child_until_its_result_is_answered() {
    let fake = answering_fake().await;
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let other = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    // The first turn is over; the child runs (or its result is on its way).
    let first = rt.pending_work(&parent.id).await.unwrap();
    assert!(!first.is_done(), "{first:?}");
    assert_eq!(first.running + first.undelivered, 1, "{first:?}");
    assert!(rt.pending_work(&other.id).await.unwrap().is_done());

    let parent_id = &parent.id;
    until(&rt, "the background work to end", |rt| async move {
        rt.pending_work(parent_id).await.unwrap().is_done()
    })
    .await;
    // Done means answered: the parent's last answer is its reply to the result.
    let messages = rt.messages(&parent.id).await.unwrap();
    assert_eq!(last_assistant_text(&messages), "saw the result");
}

/// A fake model whose parent starts one background child (which answers after 150 ms), says
/// "started it", and answers the child's result with "saw the result".
async fn answering_fake() -> FakeOpenAi {
    FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("child finished its work").with_delay(Duration::from_millis(150))
        } else if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
            Response::text("saw the result")
        } else if req.last_role() == Some("user") {
            task_call(BACKGROUND)
        } else {
            Response::text("started it")
        }
    })
    .await
    .unwrap()
}

/// A fake whose parents answer a delivered result with "saw the interruption", and a runtime
/// on it that delivers nothing by itself, with a store beside it.
async fn quiet_runtime_on_an_interruption_fake() -> (FakeOpenAi, Env, Runtime, SqliteStore) {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if last_content(req).contains("<task_result ") {
            Response::text("saw the interruption")
        } else {
            Response::text("hello")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let mut options = env.options();
    options.deliver_background = false;
    let rt = Runtime::start(options).await.unwrap();
    let store = SqliteStore::open(&rt.paths().data_dir).await.unwrap();
    (fake, env, rt, store)
}

/// A parent with a child that a dead runtime left running in the background.
async fn child_left_by_a_dead_runtime(rt: &Runtime, store: &SqliteStore) -> (SessionId, SessionId) {
    use taskforce_actors::store::BackgroundTask;
    use taskforce_agents::model::ModelRef;
    use taskforce_agents::tool::background::ChildStatus;

    let parent = rt.create_session(None, None).await.unwrap();
    let child = rt.create_session(Some(&parent.id), None).await.unwrap();
    store
        .put_background(&BackgroundTask {
            child_id: child.id.clone(),
            parent_id: parent.id.clone(),
            agent: "build".into(),
            model: ModelRef::new("fake", "gpt-test"),
            started: 1,
            status: ChildStatus::Running,
            result: None,
            delivered: false,
            owner: Some("rt_01GONEAWAY".into()),
        })
        .await
        .unwrap();
    (parent.id, child.id)
}

#[actix_rt::test]
async fn deliver_pending_reaches_only_the_given_tree() {
    use taskforce_agents::tool::background::ChildStatus;

    let (_fake, _env, rt, store) = quiet_runtime_on_an_interruption_fake().await;
    // Two trees, each with a child a dead runtime left running.
    let mut trees = Vec::new();
    for _ in 0..2 {
        trees.push(child_left_by_a_dead_runtime(&rt, &store).await);
    }
    let (first, first_child) = &trees[0];
    let (second, _) = &trees[1];

    rt.deliver_pending(first).await;
    wait_for_messages(&rt, first, "the interrupted result's answer", |m| {
        last_assistant_text(m) == "saw the interruption"
    })
    .await;
    let delivered = deliveries(&rt.messages(first).await.unwrap());
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(
        delivered[0].contains(&format!("session_id=\"{first_child}\" status=\"error\"")),
        "{delivered:?}"
    );
    assert!(delivered[0].contains("interrupted"), "{delivered:?}");
    // The other tree is left as it was (the first tree's record is marked delivered once its
    // turn has ended).
    assert!(deliveries(&rt.messages(second).await.unwrap()).is_empty());
    let store_ref = &store;
    until(
        &rt,
        "the first tree's record marked delivered",
        |_| async move { store_ref.undelivered_background().await.unwrap().len() == 1 },
    )
    .await;
    let left = store.undelivered_background().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(&left[0].parent_id, second);
    assert_eq!(left[0].status, ChildStatus::Running);
    store.close().await;
}

#[actix_rt::test]
async fn two_runtimes_starting_at_once_deliver_a_dead_runtimes_result_once() {
    let (_fake, env, setup, store) = quiet_runtime_on_an_interruption_fake().await;
    let (parent, _) = child_left_by_a_dead_runtime(&setup, &store).await;

    // Two runtimes start on the same data directory at the same moment; both look for results
    // left behind, and only one may deliver this one.
    let (a, b) = tokio::join!(Runtime::start(env.options()), Runtime::start(env.options()));
    let (a, b) = (a.unwrap(), b.unwrap());
    let (parent, store) = (&parent, &store);
    until(&a, "the result answered", |a| {
        let b = b.clone();
        async move {
            let done = a.pending_work(parent).await.unwrap().is_done()
                && b.pending_work(parent).await.unwrap().is_done();
            let messages = store.messages(parent).await.unwrap();
            done && last_assistant_text(&messages) == "saw the interruption"
        }
    })
    .await;
    // A delivery is claimed in the database before it starts, and both runtimes have none
    // left: once both are idle, every delivery that was made has landed.
    until_idle(&a).await;
    until_idle(&b).await;
    let messages = store.messages(parent).await.unwrap();
    let delivered = deliveries(&messages);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].contains("interrupted"), "{delivered:?}");
    let answers = messages
        .iter()
        .filter(|m| last_assistant_text(std::slice::from_ref(m)) == "saw the interruption")
        .count();
    assert_eq!(answers, 1);
    assert!(store.undelivered_background().await.unwrap().is_empty());
    store.close().await;
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
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap().id;
    rt.prompt(&parent, PromptInput::text("go")).await.unwrap();
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
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_total = 1\n");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap().id;
    rt.prompt(&parent, PromptInput::text("go")).await.unwrap();
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
