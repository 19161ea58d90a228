//! Rows of every type written, rewritten, read back, corrupted and orphaned.

use super::*;

both!(
    every_type_round_trips,
    messages_come_back_oldest_first_and_parts_in_id_order,
    writes_are_upserts,
    data_survives_reopening,
    corrupt_rows_are_errors_not_panics,
    rows_must_belong_to_stored_parents,
);

async fn every_type_round_trips(db: Db) {
    let store = db.open().await;

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

async fn messages_come_back_oldest_first_and_parts_in_id_order(db: Db) {
    let store = db.open().await;
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

async fn writes_are_upserts(db: Db) {
    let store = db.open().await;
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
    assert_eq!(db.count("part").await, 2);
    assert_eq!(db.count("message").await, 2);

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
    assert_eq!(db.count("part").await, 0, "parts go with their message");
    let left = store.messages(&session.id).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].info.id(), &u.id);
    // Removing what is not there is not an error.
    store.remove_part(&streamed.id).await.unwrap();
    store.remove_message(&session.id, &a.id).await.unwrap();
}

async fn data_survives_reopening(db: Db) {
    let store = db.open().await;
    let (session, u, a) = conversation(&store, "durable").await;
    let child = Session::child_of(&session, "child", 2_000);
    store.put_session(&child).await.unwrap();
    let part = text(&session, &a.id, "kept");
    store.put_part(&part).await.unwrap();
    let todos = vec![Todo::new("1", "persist", TodoPriority::High)];
    store.put_todos(&session.id, &todos).await.unwrap();
    let before = store.messages(&session.id).await.unwrap();
    drop(store);

    let store = db.open().await;
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
    store.flush().await.unwrap();
    let store = db.open().await;
    assert_eq!(
        store
            .sessions(&SessionFilter::default())
            .await
            .unwrap()
            .len(),
        2
    );
}

async fn corrupt_rows_are_errors_not_panics(db: Db) {
    let store = db.open().await;
    let (session, _u, a) = conversation(&store, "corrupt").await;
    let part = text(&session, &a.id, "fine");
    store.put_part(&part).await.unwrap();
    store
        .put_todos(&session.id, &[Todo::new("1", "x", TodoPriority::Low)])
        .await
        .unwrap();
    db.exec(
        "UPDATE part SET data = '{not json' WHERE id = $1",
        &[part.id.as_str()],
    )
    .await;
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
    db.exec(
        "UPDATE message SET data = '{\"role\": \"robot\"}' WHERE id = $1",
        &[a.id.as_str()],
    )
    .await;
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

    db.exec(
        "UPDATE todo SET data = '[]' WHERE session_id = $1",
        &[session.id.as_str()],
    )
    .await;
    let err = store.todos(&session.id).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { what: "todo", .. }),
        "{err:?}"
    );

    let mut impostor = serde_json::to_value(&session).unwrap();
    impostor["id"] = json!(SessionId::new().as_str());
    db.exec(
        "UPDATE session SET data = $1 WHERE id = $2",
        &[&impostor.to_string(), session.id.as_str()],
    )
    .await;
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
    db.exec(
        "UPDATE session SET data = 'garbage' WHERE id = $1",
        &[session.id.as_str()],
    )
    .await;
    assert_eq!(store.delete_session(&session.id).await.unwrap(), vec![]);
    assert_eq!(store.session(&session.id).await.unwrap(), None);
    for table in ["session", "message", "part", "todo"] {
        assert_eq!(db.count(table).await, 0, "{table}");
    }
}

async fn rows_must_belong_to_stored_parents(db: Db) {
    let store = db.open().await;
    let ghost = root("never stored", 1);
    let err = store
        .put_message(&user(&ghost, 2).into())
        .await
        .unwrap_err();
    match &err {
        StoreError::Database(text) => {
            assert!(is_foreign_key_error(text), "{text}");
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
    assert_eq!(db.count("todo").await, 0);
}
