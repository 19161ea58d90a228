//! The broker's semantics: once, always (and its cascade), reject (and its cascade),
//! corrections, unknown replies, stored approvals, and where requests come from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::task::JoinHandle;

use super::*;
use crate::bus::{BusItem, Filter, SessionStatus, Subscription};
use crate::store::SqliteStore;

/// `bash` is asked, except `rm *`, which is denied.
fn rules() -> Vec<Rule> {
    vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("bash", "*", Action::Ask),
        Rule::new("bash", "rm *", Action::Deny),
    ]
}

fn bash(command: &str, always: &str) -> PermissionAsk {
    PermissionAsk {
        permission: "bash".into(),
        patterns: vec![command.into()],
        always: vec![always.into()],
        force_ask: false,
        metadata: Default::default(),
    }
}

struct Fixture {
    bus: BusHandle,
    broker: Arc<PermissionBroker>,
    events: Subscription,
}

impl Fixture {
    fn new() -> Fixture {
        let bus = BusHandle::start(1024);
        Fixture::with(bus.clone(), PermissionBroker::new(bus))
    }

    fn with(bus: BusHandle, broker: PermissionBroker) -> Fixture {
        Fixture {
            events: bus.subscribe(Filter::All),
            bus,
            broker: Arc::new(broker),
        }
    }

    /// Raises `ask` in `session` in the background and waits until it is pending.
    async fn pending(
        &self,
        session: &SessionId,
        ask: PermissionAsk,
    ) -> (PermissionRequest, JoinHandle<Result<(), PermissionError>>) {
        let before = self.broker.list().len();
        let task = {
            let (broker, origin) = (
                self.broker.clone(),
                AskOrigin::root(session.clone(), "build"),
            );
            tokio::spawn(async move { broker.ask(&origin, None, ask, &rules()).await })
        };
        for _ in 0..500 {
            if self.broker.list().len() > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let request = self
            .broker
            .list()
            .last()
            .cloned()
            .expect("the ask is pending");
        (request, task)
    }

    /// The events published since the last call, up to a marker published now.
    async fn events(&mut self) -> Vec<Event> {
        let marker = SessionId::new();
        self.bus
            .publish_and_wait(Event::SessionStatus {
                session_id: marker.clone(),
                status: SessionStatus::Idle,
            })
            .await;
        let mut seen = Vec::new();
        loop {
            let item = tokio::time::timeout(Duration::from_secs(5), self.events.next()).await;
            let Ok(Some(BusItem::Event(envelope))) = item else {
                panic!("the marker never came: {item:?}")
            };
            if envelope.event.session_id() == Some(&marker) {
                return seen;
            }
            seen.push(envelope.event.clone());
        }
    }
}

/// The `(request, reply)` of every `permission.replied` event.
fn replies(events: &[Event]) -> Vec<(PermissionId, PermissionReply)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PermissionReplied {
                request_id, reply, ..
            } => Some((request_id.clone(), *reply)),
            _ => None,
        })
        .collect()
}

async fn outcome(task: JoinHandle<Result<(), PermissionError>>) -> Result<(), PermissionError> {
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the ask was answered")
        .unwrap()
}

#[actix_rt::test]
async fn once_allows_that_call_only() {
    let mut f = Fixture::new();
    let s = SessionId::new();
    let (request, task) = f.pending(&s, bash("ls", "ls *")).await;
    let events = f.events().await;
    assert!(matches!(&events[..], [Event::PermissionAsked(r)] if **r == request));

    assert!(
        f.broker
            .reply(&request.id, PermissionReply::Once, None)
            .await
    );
    assert_eq!(outcome(task).await, Ok(()));
    assert_eq!(
        replies(&f.events().await),
        [(request.id.clone(), PermissionReply::Once)]
    );
    assert!(f.broker.approvals().is_empty());
    // The same call asks again.
    let (again, task) = f.pending(&s, bash("ls", "ls *")).await;
    assert_ne!(again.id, request.id);
    f.broker.drop_session(&s);
    assert_eq!(outcome(task).await, Err(PermissionError::Rejected));
}

#[actix_rt::test]
async fn always_approves_its_patterns_for_the_session_and_every_other() {
    let mut f = Fixture::new();
    let (s, other) = (SessionId::new(), SessionId::new());
    let (first, first_task) = f.pending(&s, bash("git status", "git status *")).await;
    let (covered, covered_task) = f.pending(&s, bash("git status -s", "git status *")).await;
    let (uncovered, _uncovered_task) = f.pending(&s, bash("git log", "git log *")).await;
    let (elsewhere, _elsewhere_task) = f
        .pending(&other, bash("git status -v", "git status *"))
        .await;
    f.events().await;

    assert!(
        f.broker
            .reply(&first.id, PermissionReply::Always, None)
            .await
    );
    assert_eq!(outcome(first_task).await, Ok(()));
    assert_eq!(
        outcome(covered_task).await,
        Ok(()),
        "now allowed, so resolved"
    );
    assert_eq!(
        replies(&f.events().await),
        [
            (first.id.clone(), PermissionReply::Always),
            (covered.id.clone(), PermissionReply::Always)
        ]
    );
    // Only the same session's asks are re-checked; the others wait for their own answers.
    let left: Vec<PermissionId> = f.broker.list().into_iter().map(|r| r.id).collect();
    assert_eq!(left, [uncovered.id, elsewhere.id]);
    assert_eq!(
        f.broker.approvals(),
        [Rule::new("bash", "git status *", Action::Allow)]
    );

    // New asks of any session of this runtime are allowed without asking.
    for session in [&s, &other] {
        let origin = AskOrigin::root(session.clone(), "build");
        f.broker
            .ask(
                &origin,
                None,
                bash("git status --porcelain", "git status *"),
                &rules(),
            )
            .await
            .unwrap();
    }
    assert!(f.events().await.is_empty(), "nothing was asked");
}

#[actix_rt::test]
async fn a_plain_reject_rejects_the_sessions_other_asks() {
    let mut f = Fixture::new();
    let (s, other) = (SessionId::new(), SessionId::new());
    let (first, first_task) = f.pending(&s, bash("make", "make *")).await;
    let (second, second_task) = f.pending(&s, bash("cargo build", "cargo build *")).await;
    let (elsewhere, elsewhere_task) = f.pending(&other, bash("make", "make *")).await;
    f.events().await;

    assert!(
        f.broker
            .reply(&first.id, PermissionReply::Reject, None)
            .await
    );
    assert_eq!(outcome(first_task).await, Err(PermissionError::Rejected));
    assert_eq!(outcome(second_task).await, Err(PermissionError::Rejected));
    assert_eq!(
        replies(&f.events().await),
        [
            (first.id.clone(), PermissionReply::Reject),
            (second.id.clone(), PermissionReply::Reject)
        ]
    );
    assert_eq!(f.broker.list(), std::slice::from_ref(&elsewhere));
    assert!(
        f.broker
            .reply(&elsewhere.id, PermissionReply::Once, None)
            .await
    );
    assert_eq!(outcome(elsewhere_task).await, Ok(()));
}

#[actix_rt::test]
async fn a_reject_with_a_message_is_a_correction() {
    let mut f = Fixture::new();
    let s = SessionId::new();
    let (request, task) = f.pending(&s, bash("grep -r x", "grep *")).await;
    // Blank feedback is no feedback.
    let (blank, blank_task) = f.pending(&SessionId::new(), bash("ls", "ls *")).await;
    f.events().await;
    let feedback = Some("use rg instead".to_string());
    assert!(
        f.broker
            .reply(&request.id, PermissionReply::Reject, feedback)
            .await
    );
    let error = outcome(task).await.unwrap_err();
    assert_eq!(error, PermissionError::Corrected("use rg instead".into()));
    assert_eq!(
        error.to_string(),
        "The user rejected permission to use this specific tool call with the following feedback: use rg instead"
    );
    assert!(
        f.broker
            .reply(&blank.id, PermissionReply::Reject, Some("  ".into()))
            .await
    );
    assert_eq!(outcome(blank_task).await, Err(PermissionError::Rejected));
    assert_eq!(
        replies(&f.events().await),
        [
            (request.id, PermissionReply::Reject),
            (blank.id, PermissionReply::Reject)
        ]
    );
}

#[actix_rt::test]
async fn unknown_and_repeated_replies_are_refused_and_publish_nothing() {
    let mut f = Fixture::new();
    let s = SessionId::new();
    assert!(
        !f.broker
            .reply(&PermissionId::new(), PermissionReply::Once, None)
            .await
    );
    let (request, task) = f.pending(&s, bash("ls", "ls *")).await;
    assert!(
        f.broker
            .reply(&request.id, PermissionReply::Once, None)
            .await
    );
    outcome(task).await.unwrap();
    f.events().await;
    for reply in [
        PermissionReply::Once,
        PermissionReply::Always,
        PermissionReply::Reject,
    ] {
        assert!(!f.broker.reply(&request.id, reply, None).await, "{reply:?}");
    }
    assert!(f.events().await.is_empty());
    assert!(f.broker.approvals().is_empty());
}

#[actix_rt::test]
async fn denies_fail_at_once_and_win_over_approvals() {
    let mut f = Fixture::new();
    let s = SessionId::new();
    let (request, task) = f.pending(&s, bash("rmdir x", "rm*")).await;
    assert!(
        f.broker
            .reply(&request.id, PermissionReply::Always, None)
            .await
    );
    outcome(task).await.unwrap();
    f.events().await;
    // The approval `rm*` covers `rm -rf x`, but the deny rule `rm *` still decides.
    let origin = AskOrigin::root(s.clone(), "build");
    let denied = f
        .broker
        .ask(&origin, None, bash("rm -rf x", "rm*"), &rules())
        .await
        .unwrap_err();
    let PermissionError::Denied { rules: shown } = &denied else {
        panic!("expected a deny, got {denied:?}")
    };
    assert_eq!(
        shown,
        &rules(),
        "the session's bash rules, not the approvals"
    );
    assert!(f.events().await.is_empty(), "a deny asks nobody");
}

#[actix_rt::test]
async fn a_deny_after_an_ask_refuses_and_a_forced_ask_is_never_approved_away() {
    let mut f = Fixture::new();
    let s = SessionId::new();
    let origin = AskOrigin::root(s.clone(), "build");
    // `ls` alone would be asked; the denied `rm x` later in the same ask decides.
    let mut both = bash("ls", "ls *");
    both.patterns.push("rm x".into());
    let denied = tokio::time::timeout(
        Duration::from_secs(5),
        f.broker.ask(&origin, None, both, &rules()),
    )
    .await
    .expect("decided without asking");
    assert!(
        matches!(denied, Err(PermissionError::Denied { .. })),
        "{denied:?}"
    );
    assert!(f.events().await.is_empty(), "a deny asks nobody");

    // Approve `ls *`; a forced ask for `ls` is still put to the user.
    let (request, task) = f.pending(&s, bash("ls", "ls *")).await;
    f.broker
        .reply(&request.id, PermissionReply::Always, None)
        .await;
    outcome(task).await.unwrap();
    f.events().await;
    f.broker
        .ask(&origin, None, bash("ls -la", "ls *"), &rules())
        .await
        .unwrap();
    let mut forced = bash("ls -la", "ls *");
    forced.force_ask = true;
    let (request, task) = f.pending(&s, forced).await;
    assert_eq!(request.patterns, ["ls -la"]);
    f.broker
        .reply(&request.id, PermissionReply::Once, None)
        .await;
    outcome(task).await.unwrap();
}

#[actix_rt::test]
async fn requests_say_where_they_come_from() {
    let mut f = Fixture::new();
    let (root, child) = (SessionId::new(), SessionId::new());
    let origin = AskOrigin {
        session_id: child.clone(),
        root_session_id: root.clone(),
        path: vec!["build".into(), "explore".into()],
    };
    let task = {
        let broker = f.broker.clone();
        tokio::spawn(async move {
            broker
                .ask(&origin, None, bash("ls", "ls *"), &rules())
                .await
        })
    };
    while f.broker.list().is_empty() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let events = f.events().await;
    let request = match &events[..] {
        [Event::PermissionAsked(r)] => (**r).clone(),
        other => panic!("expected one ask, got {other:?}"),
    };
    let json = serde_json::to_value(&request).unwrap();
    assert_eq!(json["sessionID"], child.as_str());
    assert_eq!(json["rootSessionID"], root.as_str());
    assert_eq!(json["path"], serde_json::json!(["build", "explore"]));
    assert_eq!(json["permission"], "bash");
    assert_eq!(json["patterns"], serde_json::json!(["ls"]));
    assert_eq!(json["always"], serde_json::json!(["ls *"]));
    let back: PermissionRequest = serde_json::from_value(json).unwrap();
    assert_eq!(back, request);
    assert!(
        f.broker
            .reply(&request.id, PermissionReply::Once, None)
            .await
    );
    outcome(task).await.unwrap();
}

#[actix_rt::test]
async fn stored_approvals_outlive_the_broker_and_stay_in_their_project() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
    let bus = BusHandle::start(1024);
    let load = |project: &str| PermissionBroker::load(bus.clone(), store.clone(), project.into());
    {
        let f = Fixture::with(bus.clone(), load("/p/one").await.unwrap());
        let s = SessionId::new();
        let (request, task) = f.pending(&s, bash("git status", "git status *")).await;
        assert!(
            f.broker
                .reply(&request.id, PermissionReply::Always, None)
                .await
        );
        outcome(task).await.unwrap();
    }
    let stored = store.approvals("/p/one").await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        (stored[0].permission.as_str(), stored[0].pattern.as_str()),
        ("bash", "git status *")
    );
    assert!(store.approvals("/p/two").await.unwrap().is_empty());

    let mut again = Fixture::with(bus.clone(), load("/p/one").await.unwrap());
    let origin = AskOrigin::root(SessionId::new(), "build");
    again
        .broker
        .ask(
            &origin,
            None,
            bash("git status -s", "git status *"),
            &rules(),
        )
        .await
        .unwrap();
    assert!(again.events().await.is_empty(), "allowed without an ask");

    let other = Fixture::with(bus.clone(), load("/p/two").await.unwrap());
    let (request, task) = other
        .pending(&SessionId::new(), bash("git status", "git status *"))
        .await;
    assert!(
        other
            .broker
            .reply(&request.id, PermissionReply::Reject, None)
            .await
    );
    assert_eq!(outcome(task).await, Err(PermissionError::Rejected));
}
