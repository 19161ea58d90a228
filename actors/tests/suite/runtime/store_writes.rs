//! How the runtime writes to its store and publishes: a step's end committed and published
//! with the next step's opening, a child whose loop crashes in a commit, concurrent task
//! calls reading a stored tree once, and a late title that finds its session deleted.

use std::sync::Arc;
use std::time::Duration;

use taskforce_actors::store::{SessionFilter, SqliteStore, Store};
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::model::{Message, Part, PartKind, Session, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, Gate, RecordedRequest, Response};
use taskforce_testkit::script::{delegating, is_child, task_calls};

use super::watched_store::{OnCommit, WatchedStore, watched_runtime};
use super::{Env, text_of, tool_parts};

#[actix_rt::test]
async fn a_child_whose_commit_crashes_becomes_an_error_result_for_its_parent() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Crash","prompt":"p","subagent_type":"general"}"#,
        "never stored",
        "the parent carried on",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let options = env.options();
    let store = taskforce_actors::store::SqliteStore::open(&env.data())
        .await
        .unwrap();
    // A store that panics when asked to save a `general` agent's answer: a child whose writes
    // crash.
    let crashing: OnCommit = Box::new(|_, messages, _| {
        if messages
            .iter()
            .any(|m| matches!(m, Message::Assistant(a) if a.agent == "general"))
        {
            panic!("simulated crash of the child's commit");
        }
        Ok(())
    });
    let rt = Runtime::start_with_store(options, WatchedStore::new(store, crashing))
        .await
        .unwrap();
    let s = rt.create_session(None, None).await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        rt.prompt(&s.id, PromptInput::text("go")),
    )
    .await
    .expect("the parent never waits forever")
    .unwrap();
    assert_eq!(text_of(&answer), "the parent carried on");
    let ToolState::Error(e) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("the task part is an error")
    };
    assert!(e.error.starts_with("SUBAGENT_FAILED: "), "{}", e.error);
    assert!(
        e.error
            .contains("a commit of the session crashed: simulated crash of the child's commit"),
        "{}",
        e.error
    );
}

/// A short name for a stored or published state: `session`, `user`, `open` (an answer's first
/// state), `answer:<finish>`, a part's type, or `tool:<name>:<status>`.
fn label_message(m: &Message) -> String {
    match m {
        Message::User(_) => "user".into(),
        Message::Assistant(a) if a.time.completed.is_none() => "open".into(),
        Message::Assistant(a) => format!("answer:{}", a.finish.as_deref().unwrap_or("-")),
    }
}

fn label_part(p: &Part) -> String {
    match &p.kind {
        PartKind::Tool(t) => format!("tool:{}:{}", t.tool, t.state.status()),
        _ => serde_json::to_value(p).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_string(),
    }
}

#[actix_rt::test]
async fn a_delegated_prompt_commits_a_steps_end_with_the_next_steps_opening() {
    let delegate = delegating(
        r#"{"description":"Commit","prompt":"p","subagent_type":"general"}"#,
        "child answer",
        "parent answer",
    );
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if req.contains("fail now") {
            Response::error(400, "refused")
        } else {
            delegate(req)
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let store = SqliteStore::open(&env.data()).await.unwrap();
    let commits: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::default();
    let seen = commits.clone();
    let watch: OnCommit = Box::new(move |sessions, messages, parts| {
        let mut labels: Vec<String> = sessions.iter().map(|_| "session".to_string()).collect();
        labels.extend(messages.iter().map(|m| label_message(m)));
        labels.extend(parts.iter().map(|p| label_part(p)));
        labels.sort();
        seen.lock().unwrap().push(labels);
        Ok(())
    });
    let rt = Runtime::start_with_store(env.options(), WatchedStore::new(store, watch))
        .await
        .unwrap();
    let s = rt.create_session(None, None).await.unwrap();
    commits.lock().unwrap().clear();
    let answer = rt.prompt(&s.id, PromptInput::text("go")).await.unwrap();
    assert_eq!(text_of(&answer), "parent answer");
    let got = commits.lock().unwrap().clone();
    let expected: Vec<Vec<&str>> = vec![
        // The parent: its prompt with the first answer's opening.
        vec!["open", "step-start", "text", "user"],
        // The child: its row, its prompt and its answer's opening; then its answer.
        vec!["open", "session", "step-start", "text", "user"],
        vec!["answer:stop", "step-finish", "text"],
        // The parent: its task call's end and its first answer's end with the second opening.
        vec![
            "answer:tool-calls",
            "open",
            "step-finish",
            "step-start",
            "tool:task:completed",
        ],
        vec!["answer:stop", "step-finish", "text"],
    ];
    assert_eq!(got, expected, "one commit per line");

    // A step that fails writes its end at once, and a run with nothing left over commits
    // nothing more.
    commits.lock().unwrap().clear();
    rt.prompt(&s.id, PromptInput::text("fail now"))
        .await
        .unwrap();
    assert_eq!(
        *commits.lock().unwrap(),
        vec![vec!["open", "step-start", "text", "user"], vec!["answer:-"]]
    );

    // Everything is on disk: a runtime started on the same store reads the same history.
    let child = rt.children(&s.id).await.unwrap().remove(0);
    let (parent_before, child_before) = (
        rt.messages(&s.id).await.unwrap(),
        rt.messages(&child.id).await.unwrap(),
    );
    rt.shutdown().await;
    let rt = env.runtime().await;
    let parent_after = rt.messages(&s.id).await.unwrap();
    assert_eq!(parent_after, parent_before);
    assert_eq!(rt.messages(&child.id).await.unwrap(), child_before);
    let labels: Vec<Vec<String>> = parent_after
        .iter()
        .map(|m| {
            std::iter::once(label_message(&m.info))
                .chain(m.parts.iter().map(|p| label_part(p)))
                .collect()
        })
        .collect();
    assert_eq!(
        labels,
        vec![
            vec!["user", "text"],
            vec![
                "answer:tool-calls",
                "step-start",
                "tool:task:completed",
                "step-finish"
            ],
            vec!["answer:stop", "step-start", "text", "step-finish"],
            vec!["user", "text"],
            vec!["answer:-", "step-start"],
        ]
    );
}

#[actix_rt::test]
async fn a_steps_end_is_published_before_the_next_steps_opening() {
    use futures::StreamExt;
    use taskforce_actors::bus::{BusItem, Event, Filter};
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Order","prompt":"p","subagent_type":"general"}"#,
        "child answer",
        "parent answer",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    rt.prompt(&s.id, PromptInput::text("go")).await.unwrap();
    // The final states, in the order they were published (live tool states, streaming text
    // states and deltas left out).
    let mut order = Vec::new();
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(200), events.next()).await
    {
        match &e.event {
            Event::MessageUpdated { info } => order.push(label_message(info)),
            Event::PartUpdated { part } => {
                let label = label_part(part);
                let streaming = matches!(&part.kind, PartKind::Text(t)
                    if t.time.as_ref().is_some_and(|t| t.end.is_none()));
                if !streaming && !label.ends_with(":pending") && !label.ends_with(":running") {
                    order.push(label);
                }
            }
            Event::SessionIdle { .. } => order.push("idle".into()),
            _ => {}
        }
    }
    assert_eq!(
        order,
        [
            "user",
            "text",
            "open",
            "step-start",
            "tool:task:completed",
            "step-finish",
            "answer:tool-calls",
            "open",
            "step-start",
            "text",
            "step-finish",
            "answer:stop",
            "idle"
        ]
    );
}

#[actix_rt::test]
async fn concurrent_task_calls_count_a_stored_tree_from_the_store_once() {
    let args: Vec<(String, String)> = (0..20)
        .map(|i| {
            (
                format!("call_{i}"),
                format!(r#"{{"description":"part {i}","prompt":"p","subagent_type":"general"}}"#),
            )
        })
        .collect();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            Response::text("part done")
        } else if req.last_role() == Some("user") {
            task_calls(args.iter().cloned())
        } else {
            Response::text("all parts done")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_concurrent = 20\n");
    // A session from an earlier runtime: this one does not know its tree.
    let earlier = env.runtime().await;
    let s = earlier.create_session(None, None).await.unwrap();
    earlier.shutdown().await;
    let (store, rt) = watched_runtime(&env).await;
    let answer = rt.prompt(&s.id, PromptInput::text("split")).await.unwrap();
    assert_eq!(text_of(&answer), "all parts done");
    // The twenty calls started together; one of them read the stored tree (empty), the
    // others waited for its count.
    assert_eq!(store.children_reads(), 1);
    assert_eq!(rt.children(&s.id).await.unwrap().len(), 20);
    // A root this runtime made has no stored tree to read.
    let fresh = rt.create_session(None, None).await.unwrap();
    let reads = store.children_reads();
    rt.prompt(&fresh.id, PromptInput::text("split"))
        .await
        .unwrap();
    assert_eq!(store.children_reads(), reads);
    // This store reads a tree session by session (the trait's own way): the same tree as
    // SQLite's one read gives.
    let by_session = Store::tree(&*store, &s.id).await.unwrap();
    assert_eq!(by_session.len(), 21);
    assert_eq!(by_session, store.inner.tree(&s.id).await.unwrap());
    assert_eq!(rt.tree(&s.id).await.unwrap().children.len(), 20);
}

/// A runtime whose title model answers "Generated" once the returned gate opens, and a
/// session of it that was prompted (its title asked for and waiting).
async fn titled_late() -> (Gate, FakeOpenAi, Env, Arc<WatchedStore>, Runtime, Session) {
    let gate = Gate::new();
    let title_gate = gate.clone();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if req.body["model"] == "small-model" {
            Response::text("Generated").until(&title_gate)
        } else {
            Response::text("done")
        }
    })
    .await
    .unwrap();
    let env = crate::suite::titles::env(&fake);
    let (store, rt) = watched_runtime(&env).await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("hello")).await.unwrap();
    (gate, fake, env, store, rt, s)
}

/// Lets the title in with its write held, runs `meanwhile`, then lets the write go and waits
/// for its end.
async fn while_the_title_is_written(
    title: &Gate,
    store: &WatchedStore,
    meanwhile: impl std::future::Future<Output = ()>,
) {
    let (_, ended) = *store.session_writes.borrow();
    let write = Gate::new();
    store.hold_next_session_write(&write);
    title.open();
    store.session_writes(ended + 1, ended).await;
    tokio::time::timeout(taskforce_testkit::wait::PATIENCE, meanwhile)
        .await
        .expect("what came meanwhile ended");
    // What `meanwhile` wrote has ended; the title's write is still held.
    let (arrived, ended) = *store.session_writes.borrow();
    write.open();
    store.session_writes(arrived, ended + 1).await;
}

#[actix_rt::test]
async fn a_title_that_comes_after_its_session_was_deleted_does_not_bring_it_back() {
    let (title, _fake, _env, store, rt, s) = titled_late().await;
    while_the_title_is_written(&title, &store, async {
        rt.delete_session(&s.id).await.unwrap();
    })
    .await;
    assert!(
        rt.session(&s.id).await.is_err(),
        "the session stays deleted"
    );
    assert!(
        rt.sessions(&SessionFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[actix_rt::test]
async fn a_renamed_session_keeps_the_users_title() {
    let (title, _fake, _env, store, rt, s) = titled_late().await;
    while_the_title_is_written(&title, &store, async {
        let patch = taskforce_actors::SessionPatch {
            title: Some("Chosen by the user".into()),
            archived: None,
        };
        rt.update_session(&s.id, patch).await.unwrap();
    })
    .await;
    assert_eq!(rt.session(&s.id).await.unwrap().title, "Chosen by the user");
}
