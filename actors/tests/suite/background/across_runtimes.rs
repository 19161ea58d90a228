//! Background results across runtimes: an undelivered result is delivered after a restart, a
//! second runtime leaves a live runtime's child alone, pending work lasts until the result is
//! answered, and a dead runtime's result reaches only its tree, once.

use std::time::Duration;

use taskforce_actors::store::{SqliteStore, Store};
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::{until, until_idle};
use taskforce_testkit::script::{is_child, last_content, task_call};

use super::{BACKGROUND, deliveries, last_assistant_text, wait_for_messages};
use crate::suite::runtime::Env;

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
