//! Session actors: one arbiter per core, prompts queued while a session is busy (and cancelled
//! with it), idle actors stopping and coming back from the store, deleted sessions, and
//! everything surviving a restart on the same data directory.

use std::time::Duration;

use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::model::Message;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::until;
use taskforce_testkit::script::delegating;

use super::{Env, prompt_in_background, text_of};

#[actix_rt::test]
async fn one_arbiter_per_core_pins_each_to_its_own_core() {
    let fake = FakeOpenAi::start(|_: &RecordedRequest| Response::text("hi"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    // Unpinned, every arbiter may run on every core the process may use.
    let mut options = env.options();
    options.pin_arbiters = false;
    let free = Runtime::start(options).await.unwrap();
    let cores = free.arbiter_cores().await.unwrap();
    assert_eq!(cores.len(), 2);
    let usable = cores[0].clone();
    assert!(!usable.is_empty());
    assert!(cores.iter().all(|c| *c == usable), "{cores:?}");
    free.shutdown().await;

    // One arbiter per usable core: each runs on its own.
    let mut options = env.options();
    options.arbiters = usable.len();
    options.pin_arbiters = true;
    let pinned = Runtime::start(options).await.unwrap();
    let mut homes: Vec<usize> = pinned
        .arbiter_cores()
        .await
        .unwrap()
        .into_iter()
        .map(|c| {
            assert_eq!(c.len(), 1, "pinned to one core: {c:?}");
            c[0]
        })
        .collect();
    homes.sort_unstable();
    assert_eq!(homes, usable);
    pinned.shutdown().await;

    // More arbiters than cores are left to the kernel.
    let mut options = env.options();
    options.arbiters = usable.len() + 1;
    options.pin_arbiters = true;
    let crowded = Runtime::start(options).await.unwrap();
    let cores = crowded.arbiter_cores().await.unwrap();
    assert!(cores.iter().all(|c| *c == usable), "{cores:?}");
    crowded.shutdown().await;
}

#[actix_rt::test]
async fn everything_survives_a_restart_on_the_same_data_directory() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Persist","prompt":"p","subagent_type":"general"}"#,
        "child answer",
        "parent answer",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (parent_id, before_parent, before_child, before_tree) = {
        let rt = env.runtime().await;
        let parent = rt.create_session(None, None).await.unwrap();
        rt.prompt(&parent.id, PromptInput::text("remember this"))
            .await
            .unwrap();
        let child = rt.children(&parent.id).await.unwrap().remove(0);
        (
            parent.id.clone(),
            rt.messages(&parent.id).await.unwrap(),
            rt.messages(&child.id).await.unwrap(),
            rt.tree(&parent.id).await.unwrap(),
        )
    };
    let rt = env.runtime().await;
    assert_eq!(rt.messages(&parent_id).await.unwrap(), before_parent);
    let child = rt.children(&parent_id).await.unwrap().remove(0);
    assert_eq!(rt.messages(&child.id).await.unwrap(), before_child);
    let tree = rt.tree(&parent_id).await.unwrap();
    assert_eq!(tree.children.len(), 1);
    assert_eq!(tree.info, before_tree.info);
    assert_eq!(tree.total_usage, before_tree.total_usage);
    assert!(tree.total_usage.turns >= 3);
    // The restarted runtime can continue the stored session.
    let again = rt
        .prompt(&parent_id, PromptInput::text("and now?"))
        .await
        .unwrap();
    assert!(matches!(*again.info, Message::Assistant(_)));
}

#[actix_rt::test]
async fn prompts_queued_while_busy_are_answered_and_cancel_answers_them_too() {
    let fake = FakeOpenAi::start(|req| {
        if req.contains("slow") && req.last_role() == Some("user") {
            Response::text("slow answer done").with_delay(Duration::from_millis(30))
        } else {
            Response::text("quick")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let first = prompt_in_background(&rt, &s.id, "slow please");
    assert!(fake.wait_for_requests(1, Duration::from_secs(5)).await);
    let second = rt
        .prompt(&s.id, PromptInput::text("and this"))
        .await
        .unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(
        first.info.id(),
        second.info.id(),
        "both wait for the same final answer"
    );
    // The queued text reached the model as a system reminder.
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.contains("The user sent the following message"))
    );

    // A cancel answers every waiter with the cancellation error.
    let stalled = FakeOpenAi::start(|_| Response::text("never").stall_after(1))
        .await
        .unwrap();
    let env = Env::new(&stalled.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let a = prompt_in_background(&rt, &s.id, "one");
    assert!(stalled.wait_for_requests(1, Duration::from_secs(5)).await);
    // The second prompt is in the session's queue before the cancel.
    let b = rt
        .prompt_queued(&s.id, PromptInput::text("two"))
        .await
        .unwrap();
    let b = tokio::spawn(b);
    rt.cancel(&s.id).await.unwrap();
    for waiter in [a, b] {
        let r = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(r, Err(RuntimeError::Cancelled)), "{r:?}");
    }
    let users = rt
        .messages(&s.id)
        .await
        .unwrap()
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .count();
    assert_eq!(users, 2, "nothing the user sent is lost");
}

#[actix_rt::test]
async fn idle_session_actors_stop_and_come_back_from_the_store() {
    let fake = FakeOpenAi::start(|_| Response::text("hello"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let mut options = env.options();
    options.idle_stop = Duration::from_millis(50);
    let rt = Runtime::start(options).await.unwrap();
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("one")).await.unwrap();
    assert_eq!(rt.live_sessions().await.unwrap(), 1);
    until(&rt, "the idle actor to stop", |rt| async move {
        rt.live_sessions().await.unwrap() == 0
    })
    .await;
    let again = rt.prompt(&s.id, PromptInput::text("two")).await.unwrap();
    assert_eq!(text_of(&again), "hello");
    assert_eq!(rt.messages(&s.id).await.unwrap().len(), 4);
}

#[actix_rt::test]
async fn a_deleted_session_cannot_be_prompted_even_while_its_actor_was_live() {
    let fake = FakeOpenAi::start(|_| Response::text("hi")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("one")).await.unwrap();
    assert_eq!(rt.delete_session(&s.id).await.unwrap().len(), 1);
    let err = rt
        .prompt(&s.id, PromptInput::text("two"))
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::SessionNotFound(_)), "{err:?}");
    assert!(matches!(
        rt.messages(&s.id).await,
        Err(RuntimeError::SessionNotFound(_))
    ));
}
