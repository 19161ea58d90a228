//! Runtimes sharing one database take over what a runtime that died left, each thing once:
//! several stores on the same database claim at once.

use super::*;

both!(
    of_stores_claiming_one_background_record_at_once_exactly_one_wins,
    of_stores_claiming_unfinished_answers_at_once_each_answer_goes_to_one,
);

/// How many stores race.
const RACERS: usize = 4;

async fn of_stores_claiming_one_background_record_at_once_exactly_one_wins(db: Db) {
    use taskforce_actors::agents::tool::background::ChildStatus;
    use taskforce_actors::store::BackgroundTask;

    let store = db.open().await;
    let parent = root("parent", 1);
    store.put_session(&parent).await.unwrap();
    let mut children = Vec::new();
    for i in 0..10 {
        let child = Session::child_of(&parent, format!("child {i}"), 2 + i);
        store.put_session(&child).await.unwrap();
        store
            .put_background(&BackgroundTask {
                child_id: child.id.clone(),
                parent_id: parent.id.clone(),
                agent: "build".into(),
                model: model(),
                started: 2 + i,
                status: ChildStatus::Running,
                result: None,
                delivered: false,
                owner: Some("rt_gone".into()),
            })
            .await
            .unwrap();
        children.push(child.id);
    }
    let mut racers = Vec::new();
    for _ in 0..RACERS {
        racers.push(db.open().await);
    }
    for child in &children {
        let claims = racers.iter().enumerate().map(|(i, racer)| async move {
            let me = format!("rt_{i}");
            let won = racer
                .claim_background(child, Some("rt_gone"), &me)
                .await
                .unwrap();
            won.then_some(me)
        });
        let winners: Vec<String> = futures::future::join_all(claims)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(winners.len(), 1, "{winners:?}");
        let stored = store.background(child).await.unwrap().unwrap();
        assert_eq!(stored.owner.as_ref(), Some(&winners[0]));
        assert_eq!(stored.status, ChildStatus::Running);
    }
}

async fn of_stores_claiming_unfinished_answers_at_once_each_answer_goes_to_one(db: Db) {
    let dead = db.open().await;
    dead.set_runtime("rt_gone");
    let mut answers = HashSet::new();
    for i in 0..20 {
        let (session, u, _) = conversation(&dead, &format!("session {i}")).await;
        let a = assistant(&session, &u.id, 1_003);
        dead.put_message(&a.clone().into()).await.unwrap();
        answers.insert(a.id);
    }
    let found = dead.unfinished_answers(None).await.unwrap();
    // The conversation's own answers are unfinished too.
    assert_eq!(found.len(), 40);
    assert!(found.iter().all(|u| u.owner == "rt_gone"));

    let mut racers = Vec::new();
    for _ in 0..RACERS {
        racers.push(db.open().await);
    }
    let claims = racers.iter().enumerate().map(|(i, racer)| async move {
        racer
            .claim_unfinished("rt_gone", &format!("rt_{i}"), None)
            .await
            .unwrap()
    });
    let taken: Vec<_> = futures::future::join_all(claims)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(taken.len(), 40, "each answer taken once");
    let distinct: HashSet<_> = taken.iter().map(|u| u.message.clone()).collect();
    assert_eq!(distinct.len(), 40);
    assert!(answers.iter().all(|a| distinct.contains(a)));
    let now = dead.unfinished_answers(None).await.unwrap();
    assert!(now.iter().all(|u| u.owner != "rt_gone"), "{now:?}");
    for u in &taken {
        assert!(now.contains(u), "{u:?} is stored as taken");
    }
}
