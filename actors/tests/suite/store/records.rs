//! Approvals and background records.

use super::*;

both!(
    approvals_belong_to_their_project_keep_their_first_time_and_survive_reopening,
    a_background_record_is_taken_over_by_one_claim_only,
);

async fn approvals_belong_to_their_project_keep_their_first_time_and_survive_reopening(db: Db) {
    let store = db.open().await;
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
    assert_eq!(db.count("permission_approval").await, 4);
    store.flush().await.unwrap();
    drop(store);
    let store = db.open().await;
    assert_eq!(store.approvals("/p/one").await.unwrap(), expected);
    assert_eq!(
        store.approvals("/p/two").await.unwrap(),
        [approval("read", "*", 5)]
    );
    assert!(store.approvals("/p").await.unwrap().is_empty());
}

async fn a_background_record_is_taken_over_by_one_claim_only(db: Db) {
    use taskforce_actors::agents::tool::background::ChildStatus;
    use taskforce_actors::store::BackgroundTask;

    let store = db.open().await;
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
