//! The SQLite store against real database files in temporary directories.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use taskforce_actors::agents::id::{MessageId, SessionId};
use taskforce_actors::agents::model::{
    AssistantError, AssistantMessage, CompactionPart, FilePart, JsonObject, Message, MessagePath,
    ModelRef, Part, PartKind, PatchPart, ReasoningPart, Session, StepFinishPart, StepStartPart,
    SubtaskPart, TextPart, Todo, TodoPriority, TodoStatus, Tokens, ToolPart, ToolStateRunning,
    UserMessage,
};
use taskforce_actors::agents::permission::{Action, Rule};
use taskforce_actors::store::{
    Approval, MessageWithParts, SessionFilter, SqliteStore, Store, StoreError,
};
use tempfile::TempDir;

/// A fresh store in a fresh temporary directory (kept alive by the returned guard).
async fn open() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).await.unwrap();
    (dir, store)
}

/// A direct connection to the store's database file, bypassing the store.
async fn raw(store: &SqliteStore) -> SqliteConnection {
    let options = SqliteConnectOptions::new().filename(store.path());
    SqliteConnection::connect_with(&options).await.unwrap()
}

/// How many rows `table` holds.
async fn count(store: &SqliteStore, table: &str) -> i64 {
    let mut conn = raw(store).await;
    let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(&mut conn)
        .await
        .unwrap();
    n
}

fn model() -> ModelRef {
    ModelRef::new("scripted", "echo")
}

fn root(title: &str, now: u64) -> Session {
    Session::new("proj", "/srv/p", title, now)
}

fn user(session: &Session, created: u64) -> UserMessage {
    UserMessage::new(session.id.clone(), "build", model(), created)
}

fn assistant(session: &Session, parent: &MessageId, created: u64) -> AssistantMessage {
    let path = MessagePath {
        cwd: PathBuf::from("/srv/p"),
        root: PathBuf::from("/srv/p"),
    };
    AssistantMessage::new(
        session.id.clone(),
        parent.clone(),
        "build",
        &model(),
        path,
        created,
    )
}

fn text(session: &Session, message: &MessageId, text: &str) -> Part {
    Part::new(session.id.clone(), message.clone(), TextPart::new(text))
}

fn input(value: serde_json::Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

fn ids(sessions: &[Session]) -> Vec<SessionId> {
    sessions.iter().map(|s| s.id.clone()).collect()
}

/// A session, a user message and an assistant message, all stored.
async fn conversation(
    store: &SqliteStore,
    title: &str,
) -> (Session, UserMessage, AssistantMessage) {
    let session = root(title, 1_000);
    let u = user(&session, 1_001);
    let a = assistant(&session, &u.id, 1_002);
    store.put_session(&session).await.unwrap();
    store.put_message(&u.clone().into()).await.unwrap();
    store.put_message(&a.clone().into()).await.unwrap();
    (session, u, a)
}

#[tokio::test]
async fn open_creates_the_directory_and_a_wal_database() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested").join("data");
    let store = SqliteStore::open(&data).await.unwrap();
    assert_eq!(store.path(), data.join("taskforce.db"));
    assert!(store.path().is_file());
    let mut conn = raw(&store).await;
    let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    for table in ["session", "message", "part", "todo"] {
        assert_eq!(count(&store, table).await, 0, "{table}");
    }
    // The JSON batch table of migration 0002 is gone (0005).
    let (batch_objects,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'write_batch%'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(batch_objects, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_opened_at_once_on_a_new_directory_all_open() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let opens = futures::future::join_all((0..4).map(|_| SqliteStore::open(&data))).await;
        for open in opens {
            let store = open.unwrap();
            assert_eq!(count(&store, "session").await, 0);
            store.close().await;
        }
    }
}

#[tokio::test]
async fn open_reports_an_unusable_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, "x").unwrap();
    let err = SqliteStore::open(&file.join("data")).await.unwrap_err();
    match &err {
        StoreError::Open { path, message } => {
            assert!(path.ends_with("taskforce.db"), "{path}");
            assert!(message.contains("directory"), "{message}");
        }
        other => panic!("expected Open, got {other:?}"),
    }
}

#[tokio::test]
async fn every_type_round_trips() {
    let (_dir, store) = open().await;

    let parent = root("Root session", 1_000);
    let child = Session::child_of(&parent, "Child session (@explore subagent)", 2_000)
        .with_permission(vec![
            Rule::new("task", "*", Action::Deny),
            Rule::new("bash", "git *", Action::Allow),
            Rule::new("edit", "*", Action::Ask),
        ]);
    store.put_session(&parent).await.unwrap();
    store.put_session(&child).await.unwrap();
    assert_eq!(
        store.session(&parent.id).await.unwrap(),
        Some(parent.clone())
    );
    assert_eq!(store.session(&child.id).await.unwrap(), Some(child.clone()));
    assert_eq!(store.session(&SessionId::new()).await.unwrap(), None);

    let mut u = user(&parent, 1_100);
    u.system = Some("be brief".into());
    let mut a = assistant(&parent, &u.id, 1_200);
    a.cost = 0.5;
    a.tokens = Tokens {
        input: 120,
        output: 40,
        reasoning: 8,
        ..Tokens::default()
    };
    a.finish = Some("stop".into());
    a.time.completed = Some(1_300);
    a.error = Some(AssistantError::unknown("boom"));
    let u_msg: Message = u.clone().into();
    let a_msg: Message = a.clone().into();
    store.put_message(&u_msg).await.unwrap();
    store.put_message(&a_msg).await.unwrap();

    let sid = &parent.id;
    let user_parts = vec![
        text(&parent, &u.id, "read the file"),
        Part::new(
            sid.clone(),
            u.id.clone(),
            FilePart::new("text/plain", "file:///srv/p/a.txt"),
        ),
        Part::new(
            sid.clone(),
            u.id.clone(),
            SubtaskPart {
                prompt: "look around".into(),
                description: "explore".into(),
                agent: "explore".into(),
                model: Some(model()),
                command: None,
            },
        ),
    ];
    let completed = ToolPart {
        state: ToolStateRunning::new(input(json!({"filePath": "/srv/p/a.txt"})), 1_210)
            .complete("1: hello", "a.txt", 1_220)
            .into(),
        ..ToolPart::pending("call_1", "read")
    };
    let failed = ToolPart {
        state: ToolStateRunning::new(input(json!({"command": "rm -rf /"})), 1_230)
            .fail("permission denied", 1_231)
            .into(),
        ..ToolPart::pending("call_2", "bash")
    };
    let assistant_parts = vec![
        Part::new(sid.clone(), a.id.clone(), StepStartPart::default()),
        Part::new(
            sid.clone(),
            a.id.clone(),
            ReasoningPart::new("thinking", 1_201),
        ),
        Part::new(sid.clone(), a.id.clone(), completed),
        Part::new(sid.clone(), a.id.clone(), failed),
        Part::new(
            sid.clone(),
            a.id.clone(),
            ToolPart::pending("call_3", "task"),
        ),
        Part::new(
            sid.clone(),
            a.id.clone(),
            PatchPart {
                hash: "abc123".into(),
                files: vec!["a.txt".into()],
            },
        ),
        Part::new(sid.clone(), a.id.clone(), CompactionPart { auto: true }),
        Part::new(
            sid.clone(),
            a.id.clone(),
            StepFinishPart::new("stop", 0.25, Tokens::default()),
        ),
        text(&parent, &a.id, "done"),
    ];
    for part in user_parts.iter().chain(&assistant_parts) {
        store.put_part(part).await.unwrap();
    }

    let expected = vec![
        MessageWithParts {
            info: Arc::new(u_msg.clone()),
            parts: shared(user_parts),
        },
        MessageWithParts {
            info: Arc::new(a_msg),
            parts: shared(assistant_parts),
        },
    ];
    assert_eq!(store.messages(sid).await.unwrap(), expected);
    assert_eq!(
        store.message(sid, &u.id).await.unwrap(),
        Some(expected[0].clone())
    );
    assert_eq!(
        store.message(sid, &a.id).await.unwrap(),
        Some(expected[1].clone())
    );
    // A message is found only in its own session.
    assert_eq!(store.message(&child.id, &u.id).await.unwrap(), None);
    assert_eq!(store.messages(&child.id).await.unwrap(), vec![]);

    let mut doing = Todo::new("2", "write the store", TodoPriority::Medium);
    doing.status = TodoStatus::InProgress;
    let todos = vec![
        Todo::new("1", "read the reference", TodoPriority::High),
        doing,
        Todo::new("3", "celebrate", TodoPriority::Low),
    ];
    store.put_todos(sid, &todos).await.unwrap();
    assert_eq!(store.todos(sid).await.unwrap(), todos);
    assert_eq!(store.todos(&child.id).await.unwrap(), vec![]);
}

#[tokio::test]
async fn messages_come_back_oldest_first_and_parts_in_id_order() {
    let (_dir, store) = open().await;
    let session = root("ordering", 1);
    store.put_session(&session).await.unwrap();

    let messages: Vec<Message> = (0..6).map(|i| user(&session, 100 + i).into()).collect();
    let mut parts = Vec::new();
    for message in &messages {
        parts.push(
            (0..5)
                .map(|i| text(&session, message.id(), &format!("{} #{i}", message.id())))
                .collect::<Vec<_>>(),
        );
    }
    // Stored newest first, parts interleaved across messages and reversed.
    for message in messages.iter().rev() {
        store.put_message(message).await.unwrap();
    }
    for i in (0..5).rev() {
        for message_parts in parts.iter().rev() {
            store.put_part(&message_parts[i]).await.unwrap();
        }
    }

    let got = store.messages(&session.id).await.unwrap();
    let got_ids: Vec<_> = got.iter().map(|m| m.info.id().clone()).collect();
    let want_ids: Vec<_> = messages.iter().map(|m| m.id().clone()).collect();
    assert_eq!(got_ids, want_ids);
    for (m, want) in got.iter().zip(&parts) {
        assert_eq!(&plain(&m.parts), want);
    }
}

#[tokio::test]
async fn writes_are_upserts() {
    let (_dir, store) = open().await;
    let (mut session, u, mut a) = conversation(&store, "first title").await;

    session.title = "second title".into();
    session.touch(5_000);
    store.put_session(&session).await.unwrap();
    assert_eq!(
        store.session(&session.id).await.unwrap(),
        Some(session.clone())
    );
    assert_eq!(
        store.sessions(&SessionFilter::default()).await.unwrap(),
        vec![session.clone()]
    );
    let found = SessionFilter {
        search: Some("second".into()),
        ..SessionFilter::default()
    };
    assert_eq!(store.sessions(&found).await.unwrap().len(), 1);

    // A streaming text part rewritten several times, a tool part moving through its states.
    let mut streamed = text(&session, &a.id, "");
    for chunk in ["Hel", "lo", ", world"] {
        match &mut streamed.kind {
            PartKind::Text(t) => t.text.push_str(chunk),
            other => panic!("not a text part: {other:?}"),
        }
        store.put_part(&streamed).await.unwrap();
    }
    let mut tool = Part::new(
        session.id.clone(),
        a.id.clone(),
        ToolPart::pending("c", "read"),
    );
    store.put_part(&tool).await.unwrap();
    let running = ToolStateRunning::new(input(json!({"filePath": "x"})), 10);
    tool.as_tool_mut().unwrap().state = running.clone().into();
    store.put_part(&tool).await.unwrap();
    tool.as_tool_mut().unwrap().state = running.complete("ok", "x", 11).into();
    store.put_part(&tool).await.unwrap();

    // Updating the message keeps its parts (an upsert, not delete + insert).
    a.finish = Some("stop".into());
    a.time.completed = Some(2_000);
    store.put_message(&a.clone().into()).await.unwrap();

    let got = store.message(&session.id, &a.id).await.unwrap().unwrap();
    assert_eq!(*got.info, Message::from(a.clone()));
    assert_eq!(plain(&got.parts), vec![streamed.clone(), tool]);
    assert_eq!(got.parts[0].as_text().unwrap().text, "Hello, world");
    assert_eq!(count(&store, "part").await, 2);
    assert_eq!(count(&store, "message").await, 2);

    // Todo lists are replaced as a whole.
    let first = vec![
        Todo::new("1", "a", TodoPriority::High),
        Todo::new("2", "b", TodoPriority::Low),
        Todo::new("3", "c", TodoPriority::Low),
    ];
    store.put_todos(&session.id, &first).await.unwrap();
    let second = vec![Todo::new("9", "z", TodoPriority::Medium)];
    store.put_todos(&session.id, &second).await.unwrap();
    assert_eq!(store.todos(&session.id).await.unwrap(), second);
    store.put_todos(&session.id, &[]).await.unwrap();
    assert_eq!(store.todos(&session.id).await.unwrap(), vec![]);

    // Removing.
    store.remove_part(&streamed.id).await.unwrap();
    let got = store.message(&session.id, &a.id).await.unwrap().unwrap();
    assert_eq!(got.parts.len(), 1);
    store.remove_message(&session.id, &a.id).await.unwrap();
    assert_eq!(store.message(&session.id, &a.id).await.unwrap(), None);
    assert_eq!(
        count(&store, "part").await,
        0,
        "parts go with their message"
    );
    let left = store.messages(&session.id).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].info.id(), &u.id);
    // Removing what is not there is not an error.
    store.remove_part(&streamed.id).await.unwrap();
    store.remove_message(&session.id, &a.id).await.unwrap();
}

#[tokio::test]
async fn sessions_filter_and_order_in_sql() {
    let (_dir, store) = open().await;
    let mut a = root("Alpha task", 10);
    a.touch(100);
    let mut b = root("beta TASK", 20);
    b.touch(200);
    let mut c = root("Gamma", 30);
    c.touch(300);
    let mut child = Session::child_of(&a, "Task child", 40);
    child.touch(400);
    let mut tie = root("Überprüfung 100% fertig", 50);
    tie.touch(200); // the same update time as `b`, created later: it comes first
    let mut elsewhere = Session::new("other", "/srv/other", "Other project", 60);
    elsewhere.touch(50);
    for s in [&child, &b, &tie, &a, &c, &elsewhere] {
        store.put_session(s).await.unwrap();
    }

    let list = |filter: SessionFilter| {
        let store = store.clone();
        async move { ids(&store.sessions(&filter).await.unwrap()) }
    };
    let project = SessionFilter {
        project_id: Some("proj".into()),
        ..SessionFilter::default()
    };
    assert_eq!(
        list(project.clone()).await,
        ids(&[child.clone(), c.clone(), tie.clone(), b.clone(), a.clone()])
    );
    assert_eq!(
        list(SessionFilter::default()).await,
        ids(&[
            child.clone(),
            c.clone(),
            tie.clone(),
            b.clone(),
            a.clone(),
            elsewhere.clone()
        ])
    );
    let other = SessionFilter {
        project_id: Some("other".into()),
        ..SessionFilter::default()
    };
    assert_eq!(list(other).await, ids(&[elsewhere.clone()]));
    let roots = SessionFilter {
        roots: true,
        ..project.clone()
    };
    assert_eq!(
        list(roots.clone()).await,
        ids(&[c.clone(), tie.clone(), b.clone(), a.clone()])
    );
    for needle in ["task", "TASK", "Task", "sk"] {
        let search = SessionFilter {
            search: Some(needle.into()),
            ..SessionFilter::default()
        };
        assert_eq!(
            list(search).await,
            ids(&[child.clone(), b.clone(), a.clone()]),
            "{needle}"
        );
    }
    // Case-insensitive beyond ASCII; `%` and `_` are plain characters.
    for needle in ["über", "ÜBER", "100%", "% f"] {
        let search = SessionFilter {
            search: Some(needle.into()),
            ..SessionFilter::default()
        };
        assert_eq!(list(search).await, ids(&[tie.clone()]), "{needle}");
    }
    let nothing = SessionFilter {
        search: Some("_".into()),
        ..SessionFilter::default()
    };
    assert!(list(nothing).await.is_empty());
    let since = SessionFilter {
        start: Some(200),
        ..project.clone()
    };
    assert_eq!(
        list(since).await,
        ids(&[child.clone(), c.clone(), tie.clone(), b.clone()])
    );
    let limited = SessionFilter {
        limit: Some(2),
        ..project.clone()
    };
    assert_eq!(list(limited).await, ids(&[child.clone(), c.clone()]));
    let combined = SessionFilter {
        roots: true,
        start: Some(150),
        search: Some("task".into()),
        limit: Some(1),
        project_id: Some("proj".into()),
    };
    assert_eq!(list(combined).await, ids(&[b.clone()]));
    let none = SessionFilter {
        limit: Some(0),
        ..SessionFilter::default()
    };
    assert!(list(none).await.is_empty());
}

#[tokio::test]
async fn children_are_direct_and_oldest_first() {
    let (_dir, store) = open().await;
    let parent = root("parent", 1);
    let late = Session::child_of(&parent, "late", 30);
    let early = Session::child_of(&parent, "early", 10);
    let middle = Session::child_of(&parent, "middle", 20);
    let grandchild = Session::child_of(&early, "grandchild", 40);
    for s in [&parent, &late, &early, &middle, &grandchild] {
        store.put_session(s).await.unwrap();
    }
    assert_eq!(
        ids(&store.children(&parent.id).await.unwrap()),
        ids(&[early.clone(), middle, late.clone()])
    );
    assert_eq!(
        store.children(&early.id).await.unwrap(),
        vec![grandchild.clone()]
    );
    assert_eq!(store.children(&late.id).await.unwrap(), vec![]);
    assert_eq!(store.children(&grandchild.id).await.unwrap(), vec![]);
}

/// Stores a message with two parts and a todo list in `session`.
async fn fill(store: &SqliteStore, session: &Session) {
    let u = user(session, session.time.created + 1);
    store.put_message(&u.clone().into()).await.unwrap();
    store.put_part(&text(session, &u.id, "one")).await.unwrap();
    store.put_part(&text(session, &u.id, "two")).await.unwrap();
    let todos = [Todo::new("1", session.title.clone(), TodoPriority::High)];
    store.put_todos(&session.id, &todos).await.unwrap();
}

#[tokio::test]
async fn delete_removes_the_whole_subtree_descendants_first() {
    let (_dir, store) = open().await;
    let top = root("top", 1);
    let c1 = Session::child_of(&top, "c1", 2);
    let c2 = Session::child_of(&top, "c2", 3);
    let g1 = Session::child_of(&c1, "g1", 4);
    let g2 = Session::child_of(&c2, "g2", 5);
    let gg = Session::child_of(&g1, "gg", 6);
    let other = root("other", 7);
    let other_child = Session::child_of(&other, "other child", 8);
    let tree = [&top, &c1, &c2, &g1, &g2, &gg];
    for s in tree.iter().copied().chain([&other, &other_child]) {
        store.put_session(s).await.unwrap();
        fill(&store, s).await;
    }
    assert_eq!(count(&store, "part").await, 16);

    // Deleting a branch leaves its parent and siblings.
    let deleted = store.delete_session(&g1.id).await.unwrap();
    assert_eq!(ids(&deleted), ids(&[gg.clone(), g1.clone()]));
    assert_eq!(store.children(&c1.id).await.unwrap(), vec![]);
    assert!(store.session(&c1.id).await.unwrap().is_some());

    let deleted = store.delete_session(&top.id).await.unwrap();
    let got: HashSet<_> = ids(&deleted).into_iter().collect();
    let want: HashSet<_> = ids(&[top.clone(), c1.clone(), c2.clone(), g2.clone()])
        .into_iter()
        .collect();
    assert_eq!(got, want);
    assert_eq!(deleted.len(), 4);
    // Every session comes after all of its descendants.
    let position = |id: &SessionId| deleted.iter().position(|s| &s.id == id).unwrap();
    for s in &deleted {
        let mut ancestor = s.parent_id.clone();
        while let Some(a) = ancestor {
            let p = deleted.iter().find(|d| d.id == a).unwrap();
            assert!(
                position(&s.id) < position(&p.id),
                "{} before {}",
                s.title,
                p.title
            );
            ancestor = p.parent_id.clone();
        }
    }
    assert_eq!(deleted.last().unwrap(), &top);
    // The deleted sessions are returned as they were stored.
    assert!(deleted.contains(&g2));

    for s in tree {
        assert_eq!(store.session(&s.id).await.unwrap(), None);
        assert_eq!(store.messages(&s.id).await.unwrap(), vec![]);
        assert_eq!(store.todos(&s.id).await.unwrap(), vec![]);
    }
    // Only the unrelated tree is left, messages, parts and todos included.
    assert_eq!(
        ids(&store.sessions(&SessionFilter::default()).await.unwrap())
            .into_iter()
            .collect::<HashSet<_>>(),
        ids(&[other.clone(), other_child.clone()])
            .into_iter()
            .collect()
    );
    assert_eq!(count(&store, "session").await, 2);
    assert_eq!(count(&store, "message").await, 2);
    assert_eq!(count(&store, "part").await, 4);
    assert_eq!(count(&store, "todo").await, 2);
    assert_eq!(
        store.messages(&other_child.id).await.unwrap()[0]
            .parts
            .len(),
        2
    );

    // Deleting what is not there deletes nothing.
    assert_eq!(store.delete_session(&top.id).await.unwrap(), vec![]);
}

#[tokio::test]
async fn data_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).await.unwrap();
    let (session, u, a) = conversation(&store, "durable").await;
    let child = Session::child_of(&session, "child", 2_000);
    store.put_session(&child).await.unwrap();
    let part = text(&session, &a.id, "kept");
    store.put_part(&part).await.unwrap();
    let todos = vec![Todo::new("1", "persist", TodoPriority::High)];
    store.put_todos(&session.id, &todos).await.unwrap();
    let before = store.messages(&session.id).await.unwrap();
    drop(store);

    let store = SqliteStore::open(dir.path()).await.unwrap();
    assert_eq!(
        store.session(&session.id).await.unwrap(),
        Some(session.clone())
    );
    assert_eq!(store.children(&session.id).await.unwrap(), vec![child]);
    let after = store.messages(&session.id).await.unwrap();
    assert_eq!(after, before);
    assert_eq!(after[0].info.id(), &u.id);
    assert_eq!(plain(&after[1].parts), vec![part]);
    assert_eq!(store.todos(&session.id).await.unwrap(), todos);

    // Closing explicitly, then opening again (migrations are not re-applied).
    store.close().await;
    let store = SqliteStore::open(dir.path()).await.unwrap();
    assert_eq!(
        store
            .sessions(&SessionFilter::default())
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn corrupt_rows_are_errors_not_panics() {
    let (_dir, store) = open().await;
    let (session, _u, a) = conversation(&store, "corrupt").await;
    let part = text(&session, &a.id, "fine");
    store.put_part(&part).await.unwrap();
    store
        .put_todos(&session.id, &[Todo::new("1", "x", TodoPriority::Low)])
        .await
        .unwrap();
    let mut conn = raw(&store).await;

    sqlx::query("UPDATE part SET data = '{not json' WHERE id = ?1")
        .bind(part.id.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    let err = store.messages(&session.id).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { what: "part", id, .. } if id == part.id.as_str()),
        "{err:?}"
    );
    assert!(err.to_string().contains(part.id.as_str()), "{err}");
    let err = store.message(&session.id, &a.id).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { what: "part", .. }),
        "{err:?}"
    );

    // Valid JSON of the wrong shape, and a payload under another row's id.
    sqlx::query("UPDATE message SET data = '{\"role\": \"robot\"}' WHERE id = ?1")
        .bind(a.id.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    let err = store.message(&session.id, &a.id).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Corrupt {
                what: "message",
                ..
            }
        ),
        "{err:?}"
    );

    sqlx::query("UPDATE todo SET data = '[]' WHERE session_id = ?1")
        .bind(session.id.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    let err = store.todos(&session.id).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { what: "todo", .. }),
        "{err:?}"
    );

    let mut impostor = serde_json::to_value(&session).unwrap();
    impostor["id"] = json!(SessionId::new().as_str());
    sqlx::query("UPDATE session SET data = ?1 WHERE id = ?2")
        .bind(impostor.to_string())
        .bind(session.id.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    let err = store.session(&session.id).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { what: "session", id, .. } if id == session.id.as_str()),
        "{err:?}"
    );
    let err = store.sessions(&SessionFilter::default()).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Corrupt {
                what: "session",
                ..
            }
        ),
        "{err:?}"
    );

    // An unreadable session can still be deleted, with everything in it.
    sqlx::query("UPDATE session SET data = 'garbage' WHERE id = ?1")
        .bind(session.id.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(store.delete_session(&session.id).await.unwrap(), vec![]);
    assert_eq!(store.session(&session.id).await.unwrap(), None);
    for table in ["session", "message", "part", "todo"] {
        assert_eq!(count(&store, table).await, 0, "{table}");
    }
}

#[tokio::test]
async fn rows_must_belong_to_stored_parents() {
    let (_dir, store) = open().await;
    let ghost = root("never stored", 1);
    let err = store
        .put_message(&user(&ghost, 2).into())
        .await
        .unwrap_err();
    match &err {
        StoreError::Database(text) => {
            assert!(text.contains("FOREIGN KEY"), "{text}");
            assert!(text.contains(ghost.id.as_str()), "{text}");
        }
        other => panic!("expected Database, got {other:?}"),
    }
    let err = store
        .put_part(&text(&ghost, &MessageId::new(), "orphan"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    let err = store
        .put_todos(&ghost.id, &[Todo::new("1", "x", TodoPriority::Low)])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    assert_eq!(count(&store, "todo").await, 0);
}

#[tokio::test]
async fn concurrent_writes_all_land() {
    let (_dir, concrete) = open().await;
    let (session, _u, a) = conversation(&concrete, "busy").await;
    let store: Arc<dyn Store> = Arc::new(concrete.clone());

    let tasks: Vec<_> = (0..20)
        .map(|task| {
            let store = Arc::clone(&store);
            let session = session.clone();
            let message = a.id.clone();
            tokio::spawn(async move {
                let mut written = Vec::new();
                for i in 0..10 {
                    let part = text(&session, &message, &format!("task {task} part {i}"));
                    store.put_part(&part).await.unwrap();
                    written.push(part);
                    // Readers run alongside the writers.
                    if i % 5 == 0 {
                        store.messages(&session.id).await.unwrap();
                    }
                }
                written
            })
        })
        .collect();
    let mut written = Vec::new();
    for task in tasks {
        written.extend(task.await.unwrap());
    }
    assert_eq!(written.len(), 200);

    let got = store.message(&session.id, &a.id).await.unwrap().unwrap();
    assert_eq!(got.parts.len(), 200);
    let mut sorted = written.clone();
    sorted.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(plain(&got.parts), sorted);
    assert_eq!(count(&concrete, "part").await, 200);
}

#[tokio::test]
async fn queued_writes_land_in_order_and_a_bad_row_fails_alone() {
    let (_dir, store) = open().await;
    let (session, _u, a) = conversation(&store, "batch").await;
    // A part updated many times while queued ends with its last state.
    let mut streaming = text(&session, &a.id, "");
    for i in 0..50 {
        if let PartKind::Text(t) = &mut streaming.kind {
            t.text = format!("draft {i}");
        }
        store.queue_part(&streaming);
    }
    let mut others = Vec::new();
    for i in 0..30 {
        let p = text(&session, &a.id, &format!("part {i}"));
        store.queue_part(&p);
        others.push(p);
    }
    // A message queued with a part of it: the message lands first.
    let later = user(&session, 1_100);
    store.queue_message(&later.clone().into());
    store.queue_part(&text(&session, &later.id, "in the queued message"));
    // A part of a message that does not exist fails by itself, and says so.
    let orphan = text(&session, &MessageId::new(), "orphan");
    let err = store.put_part(&orphan).await.unwrap_err();
    assert!(err.to_string().contains(orphan.id.as_str()), "{err}");

    let messages = store.messages(&session.id).await.unwrap();
    assert_eq!(messages.len(), 3);
    let parts = &messages[1].parts;
    assert_eq!(parts.len(), 31);
    assert_eq!(parts[0].as_text().unwrap().text, "draft 49");
    assert_eq!(plain(&parts[1..]), others);
    assert_eq!(messages[2].parts.len(), 1);
    assert_eq!(count(&store, "part").await, 32);
}

#[tokio::test]
async fn reads_see_the_writes_queued_before_them() {
    let (_dir, store) = open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Keep the writer busy with another session's writes, so that the queued ones below are
    // still queued when they are read.
    for i in 0..2_000 {
        store.queue_part(&text(&busy, &a.id, &format!("filler {i}")));
    }
    let parent = root("parent", 1_000);
    store.put_session(&parent).await.unwrap();
    let child = Session::child_of(&parent, "child", 1_001);
    let question = user(&child, 1_002);
    let answer = assistant(&child, &question.id, 1_003);
    let (q, an): (Message, Message) = (question.clone().into(), answer.clone().into());
    let said = text(&child, &answer.id, "queued, not waited for");
    store.queue_many(
        vec![child.clone()],
        vec![q.into(), an.into()],
        vec![Arc::new(said.clone())],
    );

    // Each read waits for what was queued for its session before it.
    let messages = store.messages(&child.id).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(plain(&messages[1].parts), vec![said.clone()]);
    assert_eq!(
        store.session(&child.id).await.unwrap().unwrap().id,
        child.id
    );
    let one = store.message(&child.id, &answer.id).await.unwrap().unwrap();
    assert_eq!(one.parts.len(), 1);
    let children = store.children(&parent.id).await.unwrap();
    assert_eq!(ids(&children), vec![child.id.clone()]);
    // Lists wait for every queued write: the filler is all there.
    store.sessions(&SessionFilter::default()).await.unwrap();
    assert_eq!(count(&store, "part").await, 2_001);
}

#[tokio::test]
async fn a_group_commit_of_several_sessions_with_a_faulty_row_stores_the_rest() {
    let (_dir, store) = open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Keep the writer busy, so that the writes below queue up and commit together.
    for i in 0..2_000 {
        store.queue_part(&text(&busy, &a.id, &format!("filler {i}")));
    }
    let mut written = Vec::new();
    let mut faulty = None;
    for i in 0..6 {
        let session = root(&format!("Session {i}"), 1_000 + i);
        let question = user(&session, 2_000);
        let answer = assistant(&session, &question.id, 2_001);
        let parts: Vec<Part> = (0..3)
            .map(|k| text(&session, &answer.id, &format!("{i}.{k}")))
            .collect();
        let (q, an): (Message, Message) = (question.into(), answer.into());
        store.queue_many(
            vec![session.clone()],
            vec![q.into(), an.into()],
            parts.iter().cloned().map(Arc::new).collect(),
        );
        if i == 3 {
            // In the middle, an awaited write with a part of a message that does not exist
            // between two good ones (the current-thread runtime runs it up to its wait).
            let good = text(&busy, &a.id, "good before");
            let orphan = text(&busy, &MessageId::new(), "orphan");
            let after = text(&busy, &a.id, "good after");
            let call = {
                let store = store.clone();
                let parts = [good.clone(), orphan.clone(), after.clone()];
                tokio::spawn(async move {
                    let refs: Vec<&Part> = parts.iter().collect();
                    store.put_many(&[], &[], &refs).await
                })
            };
            tokio::task::yield_now().await;
            faulty = Some((call, good, orphan, after));
        }
        written.push((session, parts));
    }
    let (call, good, orphan, after) = faulty.unwrap();
    let err = call.await.unwrap().unwrap_err();
    assert!(err.to_string().contains(orphan.id.as_str()), "{err}");
    assert!(err.to_string().contains("FOREIGN KEY"), "{err}");

    for (session, parts) in &written {
        assert_eq!(
            store.session(&session.id).await.unwrap().as_ref(),
            Some(session)
        );
        let messages = store.messages(&session.id).await.unwrap();
        assert_eq!(messages.len(), 2, "{}", session.title);
        assert_eq!(&plain(&messages[1].parts), parts);
    }
    let busy_parts = store.message(&busy.id, &a.id).await.unwrap().unwrap().parts;
    assert_eq!(busy_parts.len(), 2_002);
    let busy_parts = plain(&busy_parts);
    assert!(busy_parts.contains(&good) && busy_parts.contains(&after));
    assert_eq!(count(&store, "part").await, 2_002 + 6 * 3);
}

#[tokio::test]
async fn a_database_written_through_the_json_batch_trigger_upgrades() {
    // The schema as it was before migration 0005, with a session written the old way.
    let data = tempfile::tempdir().unwrap();
    let old = tempfile::tempdir().unwrap();
    let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().as_ref() < "0005" {
            std::fs::copy(entry.path(), old.path().join(entry.file_name())).unwrap();
        }
    }
    let session = root("Written Before", 1_000);
    {
        let options = SqliteConnectOptions::new()
            .filename(data.path().join(SqliteStore::FILE_NAME))
            .create_if_missing(true)
            .foreign_keys(true);
        let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
        let migrator = sqlx::migrate::Migrator::new(old.path()).await.unwrap();
        migrator.run(&mut conn).await.unwrap();
        let row = json!([
            session.id.as_str(),
            null,
            session.project_id,
            session.title,
            session.title.to_lowercase(),
            1_000,
            1_000,
            serde_json::to_string(&session).unwrap()
        ]);
        sqlx::query("INSERT INTO write_batch (payload) VALUES (?1)")
            .bind(json!({"s": [row], "m": [], "p": []}).to_string())
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }

    let store = SqliteStore::open(data.path()).await.unwrap();
    assert_eq!(
        store.session(&session.id).await.unwrap(),
        Some(session.clone())
    );
    let u = user(&session, 1_001);
    store.put_message(&u.clone().into()).await.unwrap();
    store
        .put_part(&text(&session, &u.id, "after"))
        .await
        .unwrap();
    assert_eq!(store.messages(&session.id).await.unwrap()[0].parts.len(), 1);
    let filter = SessionFilter {
        search: Some("written BEFORE".into()),
        ..SessionFilter::default()
    };
    assert_eq!(
        ids(&store.sessions(&filter).await.unwrap()),
        vec![session.id.clone()]
    );
    assert_eq!(count(&store, "session").await, 1);
}

fn approval(permission: &str, pattern: &str, created: u64) -> Approval {
    Approval {
        permission: permission.into(),
        pattern: pattern.into(),
        created,
    }
}

#[tokio::test]
async fn approvals_belong_to_their_project_keep_their_first_time_and_survive_reopening() {
    let (dir, store) = open().await;
    assert!(store.approvals("/p/one").await.unwrap().is_empty());
    store.add_approvals("/p/one", &[]).await.unwrap();
    store
        .add_approvals(
            "/p/one",
            &[
                approval("bash", "git status *", 20),
                approval("edit", "*", 10),
            ],
        )
        .await
        .unwrap();
    store
        .add_approvals("/p/two", &[approval("read", "*", 5)])
        .await
        .unwrap();
    // The same permission and pattern again: the first approval stays as it was.
    store
        .add_approvals(
            "/p/one",
            &[
                approval("bash", "git status *", 99),
                approval("bash", "ls *", 30),
            ],
        )
        .await
        .unwrap();
    let expected = vec![
        approval("edit", "*", 10),
        approval("bash", "git status *", 20),
        approval("bash", "ls *", 30),
    ];
    assert_eq!(store.approvals("/p/one").await.unwrap(), expected);
    assert_eq!(count(&store, "permission_approval").await, 4);
    store.close().await;
    drop(store);
    let store = SqliteStore::open(dir.path()).await.unwrap();
    assert_eq!(store.approvals("/p/one").await.unwrap(), expected);
    assert_eq!(
        store.approvals("/p/two").await.unwrap(),
        [approval("read", "*", 5)]
    );
    assert!(store.approvals("/p").await.unwrap().is_empty());
}

/// Parts as read (shared) as plain values, to compare with what was written.
fn plain(parts: &[Arc<Part>]) -> Vec<Part> {
    parts.iter().map(|p| (**p).clone()).collect()
}

/// Parts as a message holds them.
fn shared(parts: Vec<Part>) -> Vec<Arc<Part>> {
    parts.into_iter().map(Arc::new).collect()
}

#[tokio::test]
async fn a_background_record_is_taken_over_by_one_claim_only() {
    use taskforce_actors::agents::tool::background::ChildStatus;
    use taskforce_actors::store::BackgroundTask;

    let (_dir, store) = open().await;
    let parent = root("parent", 1);
    let child = root("child", 2);
    store.put_session(&parent).await.unwrap();
    store.put_session(&child).await.unwrap();
    let mut record = BackgroundTask {
        child_id: child.id.clone(),
        parent_id: parent.id.clone(),
        agent: "build".into(),
        model: model(),
        started: 1,
        status: ChildStatus::Running,
        result: None,
        delivered: false,
        owner: Some("rt_gone".into()),
    };
    store.put_background(&record).await.unwrap();
    // Only a claim naming the current owner wins, and only once.
    assert!(
        !store
            .claim_background(&child.id, None, "rt_a")
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_background(&child.id, Some("rt_gone"), "rt_a")
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_background(&child.id, Some("rt_gone"), "rt_b")
            .await
            .unwrap()
    );
    let stored = store.background(&child.id).await.unwrap().unwrap();
    assert_eq!(stored.owner.as_deref(), Some("rt_a"));
    assert_eq!(stored.status, ChildStatus::Running);
    // A record without an owner (an older version's) is claimed from none; a delivered one
    // is never claimed.
    record.owner = None;
    store.put_background(&record).await.unwrap();
    assert!(
        store
            .claim_background(&child.id, None, "rt_b")
            .await
            .unwrap()
    );
    record.delivered = true;
    store.put_background(&record).await.unwrap();
    assert!(
        !store
            .claim_background(&child.id, None, "rt_c")
            .await
            .unwrap()
    );
    let missing = root("missing", 3);
    assert!(
        !store
            .claim_background(&missing.id, None, "rt_c")
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_sessions_update_time_only_moves_forward_whoever_writes_it() {
    let (_dir, store) = open().await;
    let mut s = root("first", 1_000);
    store.put_session(&s).await.unwrap();
    // A title written meanwhile by somebody else stays.
    s.title = "renamed".into();
    store.put_session(&s).await.unwrap();

    let missing = SessionId::new();
    let touched = store
        .touch_sessions(vec![(s.id.clone(), 5_000), (missing, 6_000)])
        .await
        .unwrap();
    assert_eq!(touched.len(), 1, "a session not stored is left out");
    assert_eq!(touched[0].time.updated, 5_000);
    assert_eq!(touched[0].title, "renamed");

    let earlier = store
        .touch_sessions(vec![(s.id.clone(), 2_000)])
        .await
        .unwrap();
    assert_eq!(earlier[0].time.updated, 5_000, "never moved back");
    let stored = store.session(&s.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.time.updated, stored.title.as_str()),
        (5_000, "renamed")
    );
    // A whole session written from an older read keeps the newer time, and its other fields.
    s.title = "renamed again".into();
    store.put_session(&s).await.unwrap();
    let stored = store.session(&s.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.time.updated, stored.title.as_str()),
        (5_000, "renamed again")
    );
    // The listing orders by the new time too.
    let newer = root("newer", 3_000);
    store.put_session(&newer).await.unwrap();
    let listed = store.sessions(&SessionFilter::default()).await.unwrap();
    assert_eq!(listed[0].id, s.id);
}
