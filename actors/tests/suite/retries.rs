//! Retries of failed model calls: backoff, retry-after, limits, status, cancel, cut streams.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter, SessionStatus};
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::model::{Message, PartKind};
use taskforce_testkit::fake_openai::{Chunk, FakeOpenAi, Response};
use taskforce_testkit::runtime::until;

use super::runtime::{Env, expect_cancelled, prompt_in_background};

/// A server answering from `script` by request number, then with `fallback`.
async fn server(script: Vec<Response>, fallback: Response) -> (FakeOpenAi, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let n = count.clone();
    let fake = FakeOpenAi::start(move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        script.get(i).cloned().unwrap_or_else(|| fallback.clone())
    })
    .await
    .unwrap();
    (fake, count)
}

fn statuses(events: &[Event]) -> Vec<SessionStatus> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SessionStatus { status, .. } => Some(status.clone()),
            _ => None,
        })
        .collect()
}

async fn drain(sub: &mut taskforce_actors::bus::Subscription) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(200), sub.next()).await
    {
        out.push(e.event.clone());
    }
    out
}

async fn runtime(
    env: &Env,
    configure: impl FnOnce(&mut taskforce_actors::RuntimeOptions),
) -> Runtime {
    let mut options = env.options();
    configure(&mut options);
    Runtime::start(options).await.unwrap()
}

#[actix_rt::test]
async fn server_errors_are_retried_with_a_retry_status_and_parts() {
    let (fake, count) = server(
        vec![Response::error(503, "busy"), Response::error(500, "oops")],
        Response::text("finally"),
    )
    .await;
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut sub = rt.subscribe(Filter::Session(s.id.clone()));
    let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 3);
    let Message::Assistant(a) = &*answer.info else {
        panic!()
    };
    assert!(a.error.is_none());
    let retries: Vec<u32> = answer
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Retry(r) => Some(r.attempt),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [1, 2]);
    let seen = statuses(&drain(&mut sub).await);
    let attempts: Vec<u32> = seen
        .iter()
        .filter_map(|s| match s {
            SessionStatus::Retry { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [1, 2]);
    assert_eq!(seen.last(), Some(&SessionStatus::Idle));
}

#[actix_rt::test]
async fn backoff_doubles_and_retry_after_is_honoured() {
    let (fake, _) = server(
        vec![
            Response::error(500, "a"),
            Response::error(500, "b"),
            Response::error(429, "slow down").with_header("retry-after-ms", "40"),
        ],
        Response::text("ok"),
    )
    .await;
    let env = Env::new(&fake.base_url(), "");
    let rt = runtime(&env, |o| o.retry_base = Duration::from_millis(20)).await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut sub = rt.subscribe(Filter::Session(s.id.clone()));
    let before = taskforce_agents::id::now_ms();
    rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    let waits: Vec<u64> = statuses(&drain(&mut sub).await)
        .iter()
        .filter_map(|s| match s {
            SessionStatus::Retry { next, .. } => Some(*next),
            _ => None,
        })
        .collect();
    assert_eq!(waits.len(), 3);
    // Each `next` lies at least its delay after the previous point in time.
    assert!(waits[0] >= before + 20);
    assert!(
        waits[1] >= waits[0] + 40,
        "the second wait doubles: {waits:?}"
    );
    assert!(waits[2] >= waits[1] + 40, "retry-after-ms 40: {waits:?}");
    assert!(
        waits[2] < waits[1] + 80 + 1000,
        "retry-after replaces the doubled 80 ms: {waits:?}"
    );
}

#[actix_rt::test]
async fn client_errors_and_context_overflow_are_not_retried() {
    for response in [
        Response::error(400, "bad request"),
        Response::error(400, "This model's maximum context length is 8192 tokens"),
    ] {
        let (fake, count) = server(vec![response], Response::text("never")).await;
        let env = Env::new(&fake.base_url(), "");
        let rt = env.runtime().await;
        let s = rt.create_session(None, None).await.unwrap();
        let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(matches!(&*answer.info, Message::Assistant(a) if a.error.is_some()));
    }
}

#[actix_rt::test]
async fn max_retries_bounds_the_attempts() {
    let (fake, count) = server(vec![], Response::error(502, "down")).await;
    let env = Env::new(&fake.base_url(), "max_retries = 1\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let Message::Assistant(a) = &*answer.info else {
        panic!()
    };
    assert_eq!(a.error.as_ref().unwrap().name(), "APIError");
}

#[actix_rt::test]
async fn a_cancel_during_the_wait_ends_it_at_once() {
    let (fake, _) = server(vec![], Response::error(503, "busy")).await;
    let env = Env::new(&fake.base_url(), "");
    let rt = runtime(&env, |o| o.retry_base = Duration::from_secs(600)).await;
    let s = rt.create_session(None, None).await.unwrap();
    let running = prompt_in_background(&rt, &s.id, "hi");
    assert!(fake.wait_for_requests(1, Duration::from_secs(5)).await);
    let sid = &s.id;
    until(&rt, "the session waiting to retry", |rt| async move {
        matches!(rt.statuses().get(sid), Some(SessionStatus::Retry { .. }))
    })
    .await;
    rt.cancel(&s.id).await.unwrap();
    expect_cancelled(running, Duration::from_secs(1), "the wait ended at once").await;
}

#[actix_rt::test]
async fn a_stream_cut_before_its_finish_is_retried() {
    let cut = Response::Stream(vec![Chunk::role(), Chunk::text("partial "), Chunk::Hangup]);
    let (fake, count) = server(vec![cut], Response::text("complete answer")).await;
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    // The cut attempt's text is gone: the answer says what the retry said, once.
    let kinds: Vec<&str> = answer.parts.iter().map(|p| p.type_name()).collect();
    assert_eq!(kinds, ["step-start", "retry", "text", "step-finish"]);
    let texts: Vec<&str> = answer
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.as_str()))
        .collect();
    assert_eq!(texts, ["complete answer"]);
    // What is stored is what was answered.
    let stored = rt.messages(&s.id).await.unwrap();
    assert_eq!(stored.last().unwrap(), &answer);
}

#[actix_rt::test]
async fn a_huge_retry_after_is_waited_an_hour_at_most_and_a_cancel_still_ends_it() {
    let slow = Response::error(429, "come back later").with_header("retry-after", "1e20");
    let (fake, _) = server(vec![], slow).await;
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut sub = rt.subscribe(Filter::Session(s.id.clone()));
    let before = taskforce_agents::id::now_ms();
    let running = prompt_in_background(&rt, &s.id, "hi");
    let next = loop {
        let item = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .expect("a retry status");
        if let Some(BusItem::Event(e)) = item
            && let Event::SessionStatus {
                status: SessionStatus::Retry { next, .. },
                ..
            } = &e.event
        {
            break *next;
        }
    };
    let hour = 3_600_000;
    assert!(next >= before + hour, "{next} vs {before}");
    assert!(next <= taskforce_agents::id::now_ms() + hour, "{next}");
    rt.cancel(&s.id).await.unwrap();
    expect_cancelled(running, Duration::from_secs(1), "the wait ended at once").await;
}

#[actix_rt::test]
async fn request_timeouts_are_retried_and_max_retries_bounds_them_from_zero_to_the_default_four() {
    let (fake, count) = server(vec![Response::error(408, "timeout")], Response::text("ok")).await;
    let env = Env::new(&fake.base_url(), "");
    let rt = runtime(&env, |o| o.retry_base = Duration::from_millis(5)).await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2, "408 is retried");
    assert!(matches!(&*answer.info, Message::Assistant(a) if a.error.is_none()));

    let (fake, count) = server(vec![], Response::error(503, "busy")).await;
    let env = Env::new(&fake.base_url(), "max_retries = 0\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "max_retries = 0: one attempt"
    );
    assert!(matches!(&*answer.info, Message::Assistant(a) if a.error.is_some()));

    let (fake, count) = server(vec![], Response::error(503, "busy")).await;
    let env = Env::new(&fake.base_url(), "");
    let rt = runtime(&env, |o| o.retry_base = Duration::from_millis(1)).await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 5, "by default 4 retries");
}

/// The assistant error of a finished prompt's answer, as text.
fn error_of(answer: &taskforce_actors::store::MessageWithParts) -> String {
    match &*answer.info {
        Message::Assistant(a) => a
            .error
            .as_ref()
            .map(|e| e.message().unwrap_or(e.name()).to_string())
            .unwrap_or_default(),
        Message::User(_) => String::new(),
    }
}

#[actix_rt::test]
async fn a_root_request_to_a_server_that_never_answers_times_out_is_retried_then_fails() {
    let (fake, count) = server(vec![], Response::Hang).await;
    let env = Env::new(&fake.base_url(), "timeout = \"200ms\"\nmax_retries = 1\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut sub = rt.subscribe(Filter::Session(s.id.clone()));
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        rt.prompt(&s.id, PromptInput::text("hi")),
    )
    .await
    .expect("a silent server never holds a request forever")
    .unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2, "one retry, then the error");
    let error = error_of(&answer);
    assert!(error.contains("did not answer in time"), "{error}");
    assert!(error.contains("200ms"), "{error}");
    let kinds: Vec<&str> = answer.parts.iter().map(|p| p.type_name()).collect();
    assert_eq!(kinds, ["step-start", "retry"]);
    let events = drain(&mut sub).await;
    assert!(
        statuses(&events)
            .iter()
            .any(|s| matches!(s, SessionStatus::Retry { attempt: 1, .. })),
        "the retry is shown"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::SessionError { .. })),
        "the failure is published"
    );
    // Both silent requests were given up (their connections dropped).
    assert!(fake.wait_for_disconnects(2, Duration::from_secs(5)).await);
}

#[actix_rt::test]
async fn a_stream_that_stalls_after_some_text_is_retried_and_the_text_is_kept_once() {
    let stalled = Response::text("the answer is forty two").stall_after(3);
    let (fake, count) = server(vec![stalled], Response::text("the answer is forty two")).await;
    let env = Env::new(&fake.base_url(), "chunk_timeout = \"200ms\"\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut sub = rt.subscribe(Filter::Session(s.id.clone()));
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        rt.prompt(&s.id, PromptInput::text("hi")),
    )
    .await
    .expect("a stalled stream never holds a request forever")
    .unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert!(matches!(&*answer.info, Message::Assistant(a) if a.error.is_none()));
    let texts: Vec<&str> = answer
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.as_str()))
        .collect();
    assert_eq!(texts, ["the answer is forty two"]);
    let stored = rt.messages(&s.id).await.unwrap();
    assert_eq!(stored.last().unwrap(), &answer, "stored as answered");
    // Listeners saw the stalled attempt's text go before the retry streamed it again.
    let events = drain(&mut sub).await;
    let partial = events.iter().find_map(|e| match e {
        Event::PartDelta { part_id, delta, .. } if delta.as_str() == "the " => {
            Some(part_id.clone())
        }
        _ => None,
    });
    let partial = partial.expect("the stalled attempt streamed its first words");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::PartRemoved { part_id, .. } if *part_id == partial)),
        "its part is removed"
    );
    let retry = answer.parts.iter().find_map(|p| match &p.kind {
        PartKind::Retry(r) => Some(r.error.message.clone()),
        _ => None,
    });
    assert!(
        retry.is_some_and(|m| m.contains("chunk_timeout")),
        "the retry says why"
    );
}
