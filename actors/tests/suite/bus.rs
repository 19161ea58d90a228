//! The bus: order, filters, lag reporting, and the permission broker on top of it.

use futures::StreamExt;

use super::next_event;
use taskforce_actors::bus::{BusHandle, BusItem, Event, Filter, SessionStatus};
use taskforce_actors::permission::{AskOrigin, PermissionBroker, PermissionReply};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;
use taskforce_agents::permission::{Action, PermissionAsk, PermissionError, Rule};

fn status(id: &SessionId) -> Event {
    Event::SessionStatus {
        session_id: id.clone(),
        status: SessionStatus::Busy,
    }
}

#[actix_rt::test]
async fn events_arrive_in_order_with_increasing_sequence_numbers() {
    let bus = BusHandle::start(1024);
    let mut sub = bus.subscribe(Filter::All);
    let ids: Vec<SessionId> = (0..100).map(|_| SessionId::new()).collect();
    for id in &ids {
        bus.publish(status(id));
    }
    let mut last = 0;
    for id in &ids {
        let Some(BusItem::Event(env)) = sub.next().await else {
            panic!("stream ended")
        };
        assert!(env.seq > last);
        last = env.seq;
        assert_eq!(env.event.session_id(), Some(id));
    }
}

#[actix_rt::test]
async fn session_and_subtree_filters() {
    let bus = BusHandle::start(1024);
    let root = Session::new("p", "/tmp", "root", 1);
    let child = Session::child_of(&root, "child", 2);
    let grandchild = Session::child_of(&child, "grandchild", 3);
    let other = Session::new("p", "/tmp", "other", 4);
    let mut only_root = bus.subscribe(Filter::Session(root.id.clone()));
    let mut tree = bus.subscribe(Filter::Subtree(root.id.clone()));
    for s in [&root, &child, &grandchild, &other] {
        bus.publish(Event::SessionCreated {
            info: std::sync::Arc::new(s.clone()),
        });
    }
    for s in [&other, &grandchild, &child, &root] {
        bus.publish(status(&s.id));
    }
    let seen: Vec<SessionId> = {
        let mut v = Vec::new();
        for _ in 0..6 {
            v.push(next_event(&mut tree).await.session_id().cloned().unwrap());
        }
        v
    };
    assert_eq!(
        seen,
        [
            root.id.clone(),
            child.id.clone(),
            grandchild.id.clone(),
            grandchild.id.clone(),
            child.id.clone(),
            root.id.clone()
        ]
    );
    assert_eq!(
        next_event(&mut only_root).await.type_name(),
        "session.created"
    );
    assert_eq!(
        next_event(&mut only_root).await.type_name(),
        "session.status"
    );
}

#[actix_rt::test]
async fn a_slow_subscriber_is_told_how_much_it_missed_and_never_blocks_publishers() {
    let bus = BusHandle::start(16);
    let mut slow = bus.subscribe(Filter::All);
    let id = SessionId::new();
    for _ in 0..100 {
        bus.publish(status(&id));
    }
    // A barrier: once this is through, all 100 were sent.
    bus.publish_and_wait(status(&id)).await;
    match slow.next().await {
        Some(BusItem::Lagged(n)) => assert_eq!(n, 101 - 16),
        other => panic!("expected a lag report, got {other:?}"),
    }
    let mut rest = 0;
    while let Ok(Some(BusItem::Event(_))) =
        tokio::time::timeout(std::time::Duration::from_millis(100), slow.next()).await
    {
        rest += 1;
    }
    assert_eq!(rest, 16);
}

#[test]
fn events_serialize_in_opencode_shape() {
    let id = SessionId::parse("ses_01JD0000000000000000000000").unwrap();
    let v = serde_json::to_value(Event::SessionIdle { session_id: id }).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"type": "session.idle", "properties": {"sessionID": "ses_01JD0000000000000000000000"}})
    );
    let v = serde_json::to_value(Event::SessionStatus {
        session_id: SessionId::parse("ses_01JD0000000000000000000000").unwrap(),
        status: SessionStatus::Retry {
            attempt: 2,
            message: "rate limited".into(),
            next: 5,
        },
    })
    .unwrap();
    assert_eq!(
        v["properties"]["status"],
        serde_json::json!({"type": "retry", "attempt": 2, "message": "rate limited", "next": 5})
    );
}

fn ask(permission: &str, pattern: &str, always: &str) -> PermissionAsk {
    PermissionAsk {
        permission: permission.into(),
        patterns: vec![pattern.into()],
        always: vec![always.into()],
        force_ask: false,
        metadata: Default::default(),
    }
}

#[actix_rt::test]
async fn broker_allows_denies_and_waits_for_replies() {
    let bus = BusHandle::start(1024);
    let broker = std::sync::Arc::new(PermissionBroker::new(bus.clone()));
    let mut events = bus.subscribe(Filter::All);
    let session = SessionId::new();
    let rules = vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("bash", "*", Action::Ask),
        Rule::new("bash", "rm *", Action::Deny),
    ];
    broker
        .ask(
            &AskOrigin::root(session.clone(), "build"),
            None,
            ask("read", "a", "*"),
            &rules,
        )
        .await
        .unwrap();
    let denied = broker
        .ask(
            &AskOrigin::root(session.clone(), "build"),
            None,
            ask("bash", "rm -rf /", "rm *"),
            &rules,
        )
        .await
        .unwrap_err();
    assert!(matches!(denied, PermissionError::Denied { ref rules } if rules.len() == 3));
    assert!(
        denied
            .to_string()
            .starts_with("The user has specified a rule")
    );

    // "always" approves the pattern for later asks.
    let waiting = {
        let broker = broker.clone();
        let session = session.clone();
        let rules = rules.clone();
        tokio::spawn(async move {
            broker
                .ask(
                    &AskOrigin::root(session.clone(), "build"),
                    None,
                    ask("bash", "git status --short", "git status *"),
                    &rules,
                )
                .await
        })
    };
    let Event::PermissionAsked(request) = next_event(&mut events).await else {
        panic!("expected permission.asked")
    };
    assert_eq!(broker.list().len(), 1);
    assert!(
        broker
            .reply(&request.id, PermissionReply::Always, None)
            .await
    );
    waiting.await.unwrap().unwrap();
    broker
        .ask(
            &AskOrigin::root(session.clone(), "build"),
            None,
            ask("bash", "git status", "git status *"),
            &rules,
        )
        .await
        .unwrap();
    assert!(
        !broker.reply(&request.id, PermissionReply::Once, None).await,
        "answered once only"
    );

    // A reject with a message is a correction; a plain reject cascades to the session's asks.
    let first = {
        let (broker, session, rules) = (broker.clone(), session.clone(), rules.clone());
        tokio::spawn(async move {
            broker
                .ask(
                    &AskOrigin::root(session.clone(), "build"),
                    None,
                    ask("bash", "ls", "ls *"),
                    &rules,
                )
                .await
        })
    };
    let Event::PermissionReplied { .. } = next_event(&mut events).await else {
        panic!("expected the earlier reply")
    };
    let Event::PermissionAsked(r1) = next_event(&mut events).await else {
        panic!()
    };
    broker
        .reply(
            &r1.id,
            PermissionReply::Reject,
            Some("use rg instead".into()),
        )
        .await;
    assert_eq!(
        first.await.unwrap().unwrap_err().to_string(),
        "The user rejected permission to use this specific tool call with the following feedback: use rg instead"
    );
    let a = {
        let (broker, session, rules) = (broker.clone(), session.clone(), rules.clone());
        tokio::spawn(async move {
            broker
                .ask(
                    &AskOrigin::root(session.clone(), "build"),
                    None,
                    ask("bash", "make", "make *"),
                    &rules,
                )
                .await
        })
    };
    let b = {
        let (broker, session, rules) = (broker.clone(), session.clone(), rules.clone());
        tokio::spawn(async move {
            broker
                .ask(
                    &AskOrigin::root(session.clone(), "build"),
                    None,
                    ask("bash", "cargo", "cargo *"),
                    &rules,
                )
                .await
        })
    };
    while broker.list().len() < 2 {
        tokio::task::yield_now().await;
    }
    let id = broker.list()[0].id.clone();
    broker.reply(&id, PermissionReply::Reject, None).await;
    assert_eq!(a.await.unwrap().unwrap_err(), PermissionError::Rejected);
    assert_eq!(b.await.unwrap().unwrap_err(), PermissionError::Rejected);
    assert!(broker.list().is_empty());
}
