//! Sessions: listing filters and order, children, deleting subtrees, update times, edits in
//! place.

use super::*;

both!(
    sessions_filter_and_order_in_sql,
    children_are_direct_and_oldest_first,
    a_tree_is_read_whole_with_each_sessions_messages_and_no_parts,
    delete_removes_the_whole_subtree_descendants_first,
    a_sessions_update_time_only_moves_forward_whoever_writes_it,
    touching_hundreds_of_sessions_at_once_moves_every_one,
    an_edit_changes_a_stored_session_and_never_brings_back_a_deleted_one,
);

async fn sessions_filter_and_order_in_sql(db: Db) {
    let store = db.open().await;
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

async fn children_are_direct_and_oldest_first(db: Db) {
    let store = db.open().await;
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

async fn a_tree_is_read_whole_with_each_sessions_messages_and_no_parts(db: Db) {
    let store = db.open().await;
    let parent = root("parent", 1);
    let late = Session::child_of(&parent, "late", 30);
    let early = Session::child_of(&parent, "early", 10);
    let grandchild = Session::child_of(&early, "grandchild", 40);
    let elsewhere = root("another tree", 2);
    let stray = Session::child_of(&elsewhere, "not of this tree", 5);
    for s in [&grandchild, &late, &parent, &early, &elsewhere, &stray] {
        store.put_session(s).await.unwrap();
    }
    // Two messages of the parent (the answer with a part), one of the grandchild, one of a
    // session of another tree.
    let asked = user(&parent, 100);
    let answered = assistant(&parent, &asked.id, 110);
    let deep = user(&grandchild, 120);
    let other = user(&stray, 130);
    for m in [
        Message::User(asked.clone()),
        Message::Assistant(answered.clone()),
        Message::User(deep.clone()),
        Message::User(other),
    ] {
        store.put_message(&m).await.unwrap();
    }
    store
        .put_part(&text(&parent, &answered.id, "hello"))
        .await
        .unwrap();

    let tree = store.tree(&parent.id).await.unwrap();
    let order: Vec<SessionId> = tree.iter().map(|t| t.session.id.clone()).collect();
    assert_eq!(
        order,
        ids(&[
            parent.clone(),
            early.clone(),
            late.clone(),
            grandchild.clone()
        ]),
        "the root, then each session before its children, siblings oldest first"
    );
    let messages =
        |i: usize| -> Vec<MessageId> { tree[i].messages.iter().map(|m| m.id().clone()).collect() };
    assert_eq!(messages(0), vec![asked.id.clone(), answered.id.clone()]);
    assert!(messages(1).is_empty() && messages(2).is_empty());
    assert_eq!(messages(3), vec![deep.id.clone()]);
    assert_eq!(
        tree[0].session,
        store.session(&parent.id).await.unwrap().unwrap()
    );

    // A subtree alone, and a session not stored.
    let below = store.tree(&early.id).await.unwrap();
    assert_eq!(
        below
            .iter()
            .map(|t| t.session.id.clone())
            .collect::<Vec<_>>(),
        ids(&[early.clone(), grandchild.clone()])
    );
    assert!(store.tree(&SessionId::new()).await.unwrap().is_empty());
}

async fn delete_removes_the_whole_subtree_descendants_first(db: Db) {
    let store = db.open().await;
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
    assert_eq!(db.count("part").await, 16);

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
    assert_eq!(db.count("session").await, 2);
    assert_eq!(db.count("message").await, 2);
    assert_eq!(db.count("part").await, 4);
    assert_eq!(db.count("todo").await, 2);
    assert_eq!(
        store.messages(&other_child.id).await.unwrap()[0]
            .parts
            .len(),
        2
    );

    // Deleting what is not there deletes nothing.
    assert_eq!(store.delete_session(&top.id).await.unwrap(), vec![]);
}

async fn a_sessions_update_time_only_moves_forward_whoever_writes_it(db: Db) {
    let store = db.open().await;
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

    // Several sessions at once, one of them twice: the later time wins, and lists read it.
    let other = root("other", 1_000);
    store.put_session(&other).await.unwrap();
    let mut both = store
        .touch_sessions(vec![
            (other.id.clone(), 7_000),
            (s.id.clone(), 5_500),
            (other.id.clone(), 6_500),
        ])
        .await
        .unwrap();
    both.sort_by_key(|t| t.time.updated);
    let times: Vec<(&str, u64)> = both
        .iter()
        .map(|t| (t.title.as_str(), t.time.updated))
        .collect();
    assert_eq!(times, [("renamed", 5_500), ("other", 7_000)]);
    let listed = store.sessions(&SessionFilter::default()).await.unwrap();
    let listed: Vec<(&str, u64)> = listed
        .iter()
        .map(|t| (t.title.as_str(), t.time.updated))
        .collect();
    assert_eq!(
        listed,
        [("other", 7_000), ("renamed", 5_500)],
        "newest first"
    );

    let earlier = store
        .touch_sessions(vec![(s.id.clone(), 2_000)])
        .await
        .unwrap();
    assert_eq!(earlier[0].time.updated, 5_500, "never moved back");
    let stored = store.session(&s.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.time.updated, stored.title.as_str()),
        (5_500, "renamed")
    );
    // A whole session written from an older read keeps the newer time, and its other fields.
    s.title = "renamed again".into();
    store.put_session(&s).await.unwrap();
    let stored = store.session(&s.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.time.updated, stored.title.as_str()),
        (5_500, "renamed again")
    );
    // The listing orders by the new time too.
    let newer = root("newer", 3_000);
    store.put_session(&newer).await.unwrap();
    let listed = store.sessions(&SessionFilter::default()).await.unwrap();
    let order: Vec<&SessionId> = listed.iter().map(|t| &t.id).collect();
    assert_eq!(order, [&other.id, &s.id, &newer.id]);
    // A child's list and a deleted session carry the moved time as well.
    let child = Session::child_of(&s, "child", 1_100);
    store.put_session(&child).await.unwrap();
    store
        .touch_sessions(vec![(child.id.clone(), 8_000)])
        .await
        .unwrap();
    let children = store.children(&s.id).await.unwrap();
    assert_eq!(children[0].time.updated, 8_000);
    let deleted = store.delete_session(&s.id).await.unwrap();
    let times: Vec<u64> = deleted.iter().map(|t| t.time.updated).collect();
    assert_eq!(times, [8_000, 5_500], "the child first, then its parent");
}

async fn touching_hundreds_of_sessions_at_once_moves_every_one(db: Db) {
    let store = db.open().await;
    let sessions: Vec<Session> = (0..300).map(|i| root(&format!("s{i}"), 1_000)).collect();
    for s in &sessions {
        store.put_session(s).await.unwrap();
    }
    let touches = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.clone(), 2_000 + i as u64))
        .collect();
    let touched = store.touch_sessions(touches).await.unwrap();
    assert_eq!(touched.len(), 300);
    for (i, s) in sessions.iter().enumerate() {
        let stored = store.session(&s.id).await.unwrap().unwrap();
        assert_eq!(stored.time.updated, 2_000 + i as u64, "{}", stored.title);
    }
}

async fn an_edit_changes_a_stored_session_and_never_brings_back_a_deleted_one(db: Db) {
    let store = db.open().await;
    let s = root("New session - 2026", 1_000);
    store.put_session(&s).await.unwrap();
    store
        .touch_sessions(vec![(s.id.clone(), 4_000)])
        .await
        .unwrap();

    // The edit sees the session as stored (its moved time) and what it changes is stored,
    // the time never going back.
    let edited = store
        .update_session(
            &s.id,
            Box::new(|s: &mut Session| {
                assert_eq!(s.time.updated, 4_000);
                s.title = "Login Fix".into();
                s.time.updated = 2_000;
                true
            }),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (edited.title.as_str(), edited.time.updated),
        ("Login Fix", 4_000)
    );
    let stored = store.session(&s.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.title.as_str(), stored.time.updated),
        ("Login Fix", 4_000)
    );
    // Searching goes by the new title.
    let found = store
        .sessions(&SessionFilter {
            search: Some("login".into()),
            ..SessionFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(&found), vec![s.id.clone()]);

    // An edit that answers false writes nothing.
    let kept = store
        .update_session(
            &s.id,
            Box::new(|s: &mut Session| {
                s.title = "not this".into();
                false
            }),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.title, "not this", "the edit's copy, as it left it");
    assert_eq!(
        store.session(&s.id).await.unwrap().unwrap().title,
        "Login Fix"
    );

    // Edits made at once, through this store and a second one on the same database (another
    // runtime), each see the one before: none is lost, none fails.
    let second = db.open().await;
    let edits = (0..16).map(|i| {
        let store = if i % 2 == 0 {
            store.clone()
        } else {
            second.clone()
        };
        let id = s.id.clone();
        tokio::spawn(async move {
            let edit = Box::new(move |s: &mut Session| {
                s.title.push_str(&format!(" {i}"));
                true
            });
            store.update_session(&id, edit).await.unwrap().unwrap()
        })
    });
    for edit in futures::future::join_all(edits).await {
        edit.unwrap();
    }
    let title = store.session(&s.id).await.unwrap().unwrap().title;
    let mut added: Vec<u32> = title
        .split(' ')
        .skip(2)
        .map(|n| n.parse().unwrap())
        .collect();
    added.sort_unstable();
    assert_eq!(added, (0..16).collect::<Vec<u32>>(), "{title}");

    // A deleted session (and one never stored) stays away: the edit is not even run.
    store.delete_session(&s.id).await.unwrap();
    for id in [s.id.clone(), SessionId::new()] {
        let edit = Box::new(|_: &mut Session| -> bool { panic!("edited a session not stored") });
        assert!(store.update_session(&id, edit).await.unwrap().is_none());
        assert!(store.session(&id).await.unwrap().is_none());
    }
    assert_eq!(db.count("session").await, 0);
}
