//! A step's commits go on behind it: the model is asked while the step's opening is still on
//! its way to the disk, but a tool call that may change anything runs only once it is there
//! (a call that only reads goes on meanwhile), and a commit that fails stops the run with the
//! store's error. A cancelled run goes idle without waiting for its new time to be written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::FutureExt;
use serde_json::Value;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{HookCall, Hooks, PromptInput, Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, Gate, RecordedRequest, Response};
use taskforce_testkit::script::delegating_with;
use taskforce_testkit::wait::PATIENCE;

use super::watched_store::{WatchedStore, failing_when, watched_runtime};
use super::{Env, expect_cancelled, prompt_in_background, text_of};
use crate::suite::next_event;

#[actix_rt::test]
async fn a_step_asks_its_model_while_its_opening_is_being_committed() {
    let asked = Gate::new();
    let seen = asked.clone();
    let fake = FakeOpenAi::start(move |_: &RecordedRequest| {
        seen.open();
        Response::text("answered")
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (store, rt) = watched_runtime(&env).await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = while_opening_is_held(&store, &rt, &s.id, "go", &asked).await;
    assert_eq!(text_of(&answer), "answered");
    assert_eq!(rt.messages(&s.id).await.unwrap().len(), 2);
}

/// Prompts `text` with the step's opening held on its way to the disk until `seen` opens (it
/// must open meanwhile), checks that nothing of the turn is on disk yet (the prompt goes with
/// the opening), then lets the commit go and answers the run's answer.
async fn while_opening_is_held(
    store: &WatchedStore,
    rt: &Runtime,
    session: &SessionId,
    text: &str,
    seen: &Gate,
) -> MessageWithParts {
    let commit = Gate::new();
    store.hold_next_opening(&commit);
    let running = prompt_in_background(rt, session, text);
    tokio::time::timeout(PATIENCE, seen.opened())
        .await
        .expect("it happens while the step's opening is held");
    assert!(rt.messages(session).await.unwrap().is_empty());
    commit.open();
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the run ends once its opening is committed")
        .unwrap()
        .unwrap()
}

/// A hook that opens its gate when a call of `tool` is about to run.
struct Runs {
    tool: &'static str,
    gate: Gate,
}

#[async_trait::async_trait]
impl Hooks for Runs {
    async fn tool_execute_before(&self, call: &HookCall<'_>, _: &mut Value) -> Result<(), String> {
        if call.tool == self.tool {
            self.gate.open();
        }
        Ok(())
    }
}

#[actix_rt::test]
async fn a_call_that_only_reads_runs_while_its_steps_opening_is_being_committed() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("user") {
            Response::tool_calls(&[("call_read", "read", r#"{"filePath":"notes.txt"}"#)])
        } else {
            Response::text("read it")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (store, rt) = watched_runtime(&env).await;
    let read = Gate::new();
    rt.add_hooks(Arc::new(Runs {
        tool: "read",
        gate: read.clone(),
    }));
    let s = rt.create_session(None, None).await.unwrap();
    let answer = while_opening_is_held(&store, &rt, &s.id, "read the notes", &read).await;
    assert_eq!(text_of(&answer), "read it");
    // The call's end is stored after its step's opening, as always.
    let messages = rt.messages(&s.id).await.unwrap();
    assert_eq!(messages.len(), 3);
    let output = messages[1]
        .parts
        .iter()
        .find_map(|p| match &p.as_tool()?.state {
            ToolState::Completed(c) => Some(c.output.clone()),
            _ => None,
        })
        .expect("the read is stored as completed");
    assert!(output.contains("hello from the project"), "{output}");
}

/// A runtime whose model writes `made.txt` with a tool call, then answers; the store fails
/// the first commit of an answer's opening ("disk full") once. Also answers how many times
/// the model was asked.
async fn failing_once() -> (FakeOpenAi, Env, Runtime, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        count.fetch_add(1, Ordering::SeqCst);
        if req.last_role() == Some("user") {
            Response::tool_calls(&[(
                "call_write",
                "write",
                r#"{"filePath":"made.txt","content":"written"}"#,
            )])
        } else {
            Response::text("wrote it")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "\n[permission]\nedit = \"allow\"\n");
    let failed = AtomicBool::new(false);
    let (_, rt) = failing_when(&env, move |messages| {
        let opening = messages
            .iter()
            .any(|m| matches!(m, Message::Assistant(a) if a.time.completed.is_none()));
        opening && !failed.swap(true, Ordering::SeqCst)
    })
    .await;
    (fake, env, rt, asked)
}

#[actix_rt::test]
async fn a_tool_call_does_not_run_when_its_steps_opening_could_not_be_stored() {
    let (_fake, env, rt, asked) = failing_once().await;
    let s = rt.create_session(None, None).await.unwrap();
    let result = rt.prompt(&s.id, PromptInput::text("write it")).await;
    let Err(RuntimeError::Store(e)) = &result else {
        panic!("the run fails with the store's error: {result:?}")
    };
    assert!(e.to_string().contains("disk full"), "{e}");
    assert!(
        !env.project().join("made.txt").exists(),
        "the tool did not run"
    );
    // The run stopped at the failure: the model was not asked again.
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // The store is fine again: the session goes on, and the call runs this time.
    let answer = rt
        .prompt(&s.id, PromptInput::text("write it"))
        .await
        .unwrap();
    assert_eq!(text_of(&answer), "wrote it");
    assert_eq!(
        std::fs::read_to_string(env.project().join("made.txt")).unwrap(),
        "written"
    );
}

#[actix_rt::test]
async fn a_cancelled_run_goes_idle_without_waiting_for_its_new_time_which_is_published_after() {
    let stalled = FakeOpenAi::start(|_| Response::text("never").stall_after(1))
        .await
        .unwrap();
    let env = Env::new(&stalled.base_url(), "");
    let (store, rt) = watched_runtime(&env).await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    let running = prompt_in_background(&rt, &s.id, "one");
    assert!(stalled.wait_for_requests(1, PATIENCE).await);
    // From now on the store holds the writes of new times.
    taskforce_testkit::wait::next_millisecond().await;
    let cancelled_at = taskforce_agents::id::now_ms();
    let held = Gate::new();
    store.hold_touches_from(cancelled_at, &held);
    rt.cancel(&s.id).await.unwrap();
    // The run ends and the session goes idle while its new time is still held.
    expect_cancelled(running, PATIENCE, "the cancelled run's end").await;
    loop {
        match next_event(&mut events).await {
            Event::SessionIdle { .. } => break,
            Event::SessionUpdated { info } => assert!(
                info.time.updated < cancelled_at,
                "the new time went out before it was written"
            ),
            _ => {}
        }
    }
    // Once the store takes it, the new time is written and published.
    held.open();
    loop {
        if let Event::SessionUpdated { info } = next_event(&mut events).await
            && info.time.updated >= cancelled_at
        {
            break;
        }
    }
    let stored = rt.session(&s.id).await.unwrap();
    assert!(stored.time.updated >= cancelled_at);
}

#[actix_rt::test]
async fn a_cancelled_run_whose_writes_could_not_be_stored_leaves_its_next_run_to_read_the_store() {
    let stalled = FakeOpenAi::start(|_| Response::text("never").stall_after(1))
        .await
        .unwrap();
    let env = Env::new(&stalled.base_url(), "");
    let failing = Arc::new(AtomicBool::new(false));
    let fail = failing.clone();
    let (store, rt) = failing_when(&env, move |_| fail.load(Ordering::SeqCst)).await;
    let s = rt.create_session(None, None).await.unwrap();
    // The run's commits fail while its model call hangs; then it is cancelled.
    failing.store(true, Ordering::SeqCst);
    let running = prompt_in_background(&rt, &s.id, "one");
    assert!(stalled.wait_for_requests(1, PATIENCE).await);
    rt.cancel(&s.id).await.unwrap();
    expect_cancelled(running, PATIENCE, "the cancelled run's end").await;
    // The store works again: the next run builds on what it holds, not on the memory of a run
    // whose writes were lost.
    failing.store(false, Ordering::SeqCst);
    let reads = store.message_reads();
    let next = prompt_in_background(&rt, &s.id, "two");
    assert!(stalled.wait_for_requests(2, PATIENCE).await);
    assert!(
        store.message_reads() > reads,
        "the next run read the session's messages from the store"
    );
    rt.cancel(&s.id).await.unwrap();
    expect_cancelled(next, PATIENCE, "the second run's end").await;
}

#[actix_rt::test]
async fn a_task_call_takes_its_childs_answer_while_the_childs_last_writes_are_being_committed() {
    let stored = Gate::new();
    let fake = looking_child(&stored).await;
    let env = Env::new(&fake.base_url(), "");
    let (store, rt) = watched_runtime(&env).await;
    let parent = rt.create_session(None, None).await.unwrap();
    // Every answer but the parent's is held on its way to the disk.
    let held = Gate::new();
    store.hold_answers_except(&parent.id, &held);
    let mut events = rt.subscribe(Filter::All);
    prompt_through_child(&rt, &mut events, &parent.id, &stored).await;
    let child = rt.children(&parent.id).await.unwrap().remove(0).id;
    // The child's idle follows its last writes: not out yet.
    while let Some(Some(item)) = futures::StreamExt::next(&mut events).now_or_never() {
        if let BusItem::Event(e) = item {
            assert!(
                !matches!(&e.event, Event::SessionIdle { session_id } if *session_id == child),
                "the child went idle before its answer was written"
            );
        }
    }
    held.open();
    loop {
        if let Event::SessionIdle { session_id } = next_event(&mut events).await
            && session_id == child
        {
            break;
        }
    }
    let messages = rt.messages(&child).await.unwrap();
    let last = messages.last().unwrap();
    assert_eq!(text_of(last), "the child looked");
    let Message::Assistant(a) = &*last.info else {
        panic!("the child's last message is its answer")
    };
    assert!(a.time.completed.is_some());
}

/// A model whose root delegates one task to a child that answers "the child looked" once
/// `stored` opens, then answers "the parent heard".
async fn looking_child(stored: &Gate) -> FakeOpenAi {
    let stored = stored.clone();
    FakeOpenAi::start(delegating_with(
        r#"{"description":"Look","prompt":"Look around","subagent_type":"general"}"#,
        move || Response::text("the child looked").until(&stored),
        "the parent heard",
    ))
    .await
    .unwrap()
}

/// Prompts `parent`, whose model delegates to a child that answers once `stored` opens, and
/// opens it once the child's session is stored (its `session.created` is out): a child ending
/// before its own row is stored waits for its commits, which is not what these tests are
/// about. Checks the parent's answer.
async fn prompt_through_child(
    rt: &Runtime,
    events: &mut taskforce_actors::bus::Subscription,
    parent: &SessionId,
    stored: &Gate,
) {
    let running = prompt_in_background(rt, parent, "look");
    loop {
        if let Event::SessionCreated { info } = next_event(events).await
            && info.parent_id.as_ref() == Some(parent)
        {
            break;
        }
    }
    stored.open();
    let answer = tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the parent's call goes on while its child's answer is being written")
        .unwrap()
        .unwrap();
    assert_eq!(text_of(&answer), "the parent heard");
}

/// A runtime whose root delegates one task to a child that answers "the child looked"; the
/// store fails the first `failures` commits that hold the child's completed answer ("disk
/// full"). Also answers how many such commits it saw.
async fn failing_childs_end(failures: usize) -> ChildsEnd {
    let stored = Gate::new();
    let fake = looking_child(&stored).await;
    let env = Env::new(&fake.base_url(), "");
    let failed = Arc::new(AtomicUsize::new(0));
    let count = failed.clone();
    let (store, rt) = failing_when(&env, move |messages| {
        let childs_end = messages.iter().any(|m| {
            matches!(m, Message::Assistant(a) if a.agent == "general" && a.time.completed.is_some())
        });
        childs_end && count.fetch_add(1, Ordering::SeqCst) < failures
    })
    .await;
    (fake, env, store, rt, failed, stored)
}

/// The fake model, the project, the store, the runtime, how many commits of the child's
/// answer were seen, and the gate the child's answer waits for (see [`prompt_through_child`]).
type ChildsEnd = (
    FakeOpenAi,
    Env,
    Arc<WatchedStore>,
    Runtime,
    Arc<AtomicUsize>,
    Gate,
);

/// Prompts a new root, which delegates to a child and hears it; waits for the child's
/// `session.idle` and answers the child with the `session.error`s of it that came before.
async fn delegate(rt: &Runtime, stored: &Gate) -> (SessionId, Vec<String>) {
    let parent = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::All);
    prompt_through_child(rt, &mut events, &parent.id, stored).await;
    let child = rt.children(&parent.id).await.unwrap().remove(0).id;
    let mut errors = Vec::new();
    loop {
        match next_event(&mut events).await {
            Event::SessionIdle { session_id } if session_id == child => return (child, errors),
            Event::SessionError {
                session_id: Some(id),
                error,
            } if id == child => errors.push(format!("{error:?}")),
            _ => {}
        }
    }
}

#[actix_rt::test]
async fn a_childs_last_writes_that_fail_once_after_its_call_took_the_answer_are_written_again() {
    let (_fake, _env, _store, rt, failed, stored) = failing_childs_end(1).await;
    let (child, errors) = delegate(&rt, &stored).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        failed.load(Ordering::SeqCst) >= 2,
        "the first write failed, the second went through"
    );
    // The child's answer is stored whole, as its parent heard it.
    let messages = rt.messages(&child).await.unwrap();
    let last = messages.last().unwrap();
    assert_eq!(text_of(last), "the child looked");
    let Message::Assistant(a) = &*last.info else {
        panic!("the child's last message is its answer")
    };
    assert!(
        a.time.completed.is_some(),
        "the child's answer is stored as complete"
    );
}

#[actix_rt::test]
async fn a_childs_last_writes_that_cannot_be_stored_are_reported_and_its_next_run_reads_the_store()
{
    let (_fake, _env, store, rt, _failed, stored) = failing_childs_end(usize::MAX).await;
    // The child says its answer could not be stored, and nothing shows it as stored.
    let (child, errors) = delegate(&rt, &stored).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("could not be stored") && e.contains("disk full")),
        "{errors:?}"
    );
    let messages = rt.messages(&child).await.unwrap();
    let stored_as_complete = messages
        .iter()
        .any(|m| matches!(&*m.info, Message::Assistant(a) if a.time.completed.is_some()));
    assert!(!stored_as_complete, "the child's answer is not on disk");
    // The child's next run builds on what the store holds, not on the answer it remembers.
    let reads = store.message_reads();
    let _ = rt.prompt(&child, PromptInput::text("again")).await;
    assert!(
        store.message_reads() > reads,
        "the next run read the child's messages from the store"
    );
}
