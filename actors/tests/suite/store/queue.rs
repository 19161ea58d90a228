//! Writes from many tasks, writes queued without waiting, group commit and read-your-writes.

use super::*;

both!(
    concurrent_writes_all_land,
    queued_writes_land_in_order_and_a_bad_row_fails_alone,
    reads_see_the_writes_queued_before_them,
    writes_handed_over_ahead_are_read_at_once_and_land_before_later_writes,
    a_group_commit_of_several_sessions_with_a_faulty_row_stores_the_rest,
    a_session_written_several_times_in_one_commit_keeps_its_latest_time_and_last_title,
    patient_writes_are_stored_whoever_encodes_them_and_a_faulty_row_fails_its_waiter,
);

async fn concurrent_writes_all_land(db: Db) {
    let store = db.open().await;
    let (session, _u, a) = conversation(&store, "busy").await;

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
    assert_eq!(db.count("part").await, 200);
}

async fn queued_writes_land_in_order_and_a_bad_row_fails_alone(db: Db) {
    let store = db.open().await;
    let (session, _u, a) = conversation(&store, "batch").await;
    // A part updated many times while queued ends with its last state. (Queued while the
    // writer collects, as here, the parts go to it as they are and it encodes them; queued
    // while it commits, they are encoded on the way, as `queue_message` does: one job each,
    // in queue order, either way.)
    let mut streaming = text(&session, &a.id, "");
    for i in 0..50 {
        if let PartKind::Text(t) = &mut streaming.kind {
            t.text = format!("draft {i}");
        }
        store.queue_part(Arc::new(streaming.clone()));
    }
    let mut others = Vec::new();
    for i in 0..30 {
        let p = text(&session, &a.id, &format!("part {i}"));
        store.queue_part(Arc::new(p.clone()));
        others.push(p);
    }
    // A message queued with a part of it: the message lands first.
    let later = user(&session, 1_100);
    store.queue_message(&later.clone().into());
    store.queue_part(Arc::new(text(&session, &later.id, "in the queued message")));
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
    assert_eq!(db.count("part").await, 32);
}

async fn reads_see_the_writes_queued_before_them(db: Db) {
    let store = db.open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Keep the writer busy with another session's writes, so that the queued ones below are
    // still queued when they are read.
    for i in 0..2_000 {
        store.queue_part(Arc::new(text(&busy, &a.id, &format!("filler {i}"))));
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
    assert_eq!(db.count("part").await, 2_001);
}

async fn writes_handed_over_ahead_are_read_at_once_and_land_before_later_writes(db: Db) {
    use futures::FutureExt;
    let store = db.open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Keep the writer busy, so that the writes handed over below are still queued when read.
    for i in 0..2_000 {
        store.queue_part(Arc::new(text(&busy, &a.id, &format!("filler {i}"))));
    }
    let (session, _q, answer) = conversation(&store, "ahead").await;
    let mut finished = answer.clone();
    finished.time.completed = Some(1_500);
    let finished: Message = finished.into();
    let said = text(&session, &answer.id, "handed over, not waited for");
    let mut committing = store.put_many_ahead(&[&finished], &[&said]);
    // A read made now waits for them.
    let read = store
        .message(&session.id, &answer.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plain(&read.parts), vec![said.clone()]);
    assert_eq!(
        read.info.as_assistant().unwrap().time.completed,
        Some(1_500)
    );
    // A write handed over later lands after them: once it is stored, so are they.
    let later = text(&session, &answer.id, "written after");
    store.put_part(&later).await.unwrap();
    assert!(
        matches!((&mut committing).now_or_never(), Some(Ok(()))),
        "the writes handed over first were committed first"
    );
    let read = store
        .message(&session.id, &answer.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plain(&read.parts), vec![said, later]);
}

async fn a_group_commit_of_several_sessions_with_a_faulty_row_stores_the_rest(db: Db) {
    let store = db.open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Keep the writer busy, so that the writes below queue up and commit together.
    for i in 0..2_000 {
        store.queue_part(Arc::new(text(&busy, &a.id, &format!("filler {i}"))));
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
    assert!(is_foreign_key_error(&err.to_string()), "{err}");

    for (session, parts) in &written {
        stored_as_written(&store, session, parts).await;
    }
    let busy_parts = store.message(&busy.id, &a.id).await.unwrap().unwrap().parts;
    assert_eq!(busy_parts.len(), 2_002);
    let busy_parts = plain(&busy_parts);
    assert!(busy_parts.contains(&good) && busy_parts.contains(&after));
    assert_eq!(db.count("part").await, 2_002 + 6 * 3);
}

async fn a_session_written_several_times_in_one_commit_keeps_its_latest_time_and_last_title(
    db: Db,
) {
    let store = db.open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Keep the writer busy, so that the writes below queue up and commit together.
    for i in 0..2_000 {
        store.queue_part(Arc::new(text(&busy, &a.id, &format!("filler {i}"))));
    }
    let mut session = root("first", 1_000);
    let question = user(&session, 1_001);
    for (title, updated) in [("first", 1_000), ("newer", 9_000), ("older read", 5_000)] {
        session.title = title.into();
        session.time.updated = updated;
        let q: Message = question.clone().into();
        store.queue_many(vec![session.clone()], vec![q.into()], Vec::new());
    }
    let stored = store.session(&session.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.title.as_str(), stored.time.updated),
        ("older read", 9_000)
    );
    let listed = store.sessions(&SessionFilter::default()).await.unwrap();
    assert_eq!(listed[0].id, session.id, "listed by the latest time");
    assert_eq!(store.messages(&session.id).await.unwrap().len(), 1);
}

async fn patient_writes_are_stored_whoever_encodes_them_and_a_faulty_row_fails_its_waiter(db: Db) {
    let store = db.open().await;
    let (busy, _u, a) = conversation(&store, "busy").await;
    // Written at once (nothing pending), then twice behind a burst of queued writes (encoded
    // by the writer if it is still collecting the burst, by the caller if it is committing
    // it): each is stored all the same.
    let mut written = Vec::new();
    for round in 0..3 {
        if round > 0 {
            for i in 0..500 {
                store.queue_part(Arc::new(text(&busy, &a.id, &format!("filler {round}.{i}"))));
            }
        }
        let session = root(&format!("Patient {round}"), 1_000 + round);
        let question = user(&session, 2_000);
        let answer = assistant(&session, &question.id, 2_001);
        let part = text(&session, &answer.id, &format!("patient {round}"));
        let (q, an): (Message, Message) = (question.into(), answer.into());
        store
            .put_many_patiently(
                vec![Arc::new(session.clone())],
                vec![Arc::new(q), Arc::new(an)],
                vec![Arc::new(part.clone())],
            )
            .await
            .unwrap();
        written.push((session, part));
    }
    for (session, part) in &written {
        stored_as_written(&store, session, std::slice::from_ref(part)).await;
    }
    // A part of a message that does not exist fails its waiter, naming it; the good part
    // beside it is stored.
    for i in 0..500 {
        store.queue_part(Arc::new(text(&busy, &a.id, &format!("more filler {i}"))));
    }
    let good = text(&busy, &a.id, "good");
    let orphan = text(&busy, &MessageId::new(), "orphan");
    let err = store
        .put_many_patiently(
            Vec::new(),
            Vec::new(),
            vec![Arc::new(good.clone()), Arc::new(orphan.clone())],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains(orphan.id.as_str()), "{err}");
    assert!(is_foreign_key_error(&err.to_string()), "{err}");
    let parts = plain(&store.message(&busy.id, &a.id).await.unwrap().unwrap().parts);
    assert!(parts.contains(&good));
    assert!(!parts.contains(&orphan));
}

/// Asserts that `session` is stored as written, with its question and its answer, whose parts
/// are `parts`.
async fn stored_as_written(store: &Arc<dyn Store>, session: &Session, parts: &[Part]) {
    assert_eq!(
        store.session(&session.id).await.unwrap().as_ref(),
        Some(session)
    );
    let messages = store.messages(&session.id).await.unwrap();
    assert_eq!(messages.len(), 2, "{}", session.title);
    assert_eq!(plain(&messages[1].parts), parts);
}
