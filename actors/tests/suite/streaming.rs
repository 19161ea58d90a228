//! Streaming text on the bus: every piece as `message.part.delta`, the whole part when it
//! starts, when it ends and at most every 100 ms between.

use std::time::{Duration, Instant};

use futures::StreamExt;
use taskforce_actors::PromptInput;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_agents::model::{Part, PartKind};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};

use super::runtime::Env;

/// The text of a text part.
fn text_of(part: &Part) -> Option<&str> {
    match &part.kind {
        PartKind::Text(t) => Some(&t.text),
        _ => None,
    }
}

/// What a client drawing the text part sees: each whole state (when it arrived, its text, its
/// end time) and each delta, in order.
#[derive(Debug)]
enum Seen {
    Whole(Instant, String, bool),
    Delta(String),
}

async fn watch_text(response: Response) -> Vec<Seen> {
    let fake = FakeOpenAi::start(move |_| response.clone()).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    // All events: a one-session queue would drop the oldest of a burst of 1,000 deltas.
    let mut events = rt.subscribe(Filter::All);
    let prompt = {
        let rt = rt.clone();
        let id = s.id.clone();
        tokio::spawn(async move { rt.prompt(&id, PromptInput::text("go")).await })
    };
    // Every text part's states (the prompt's own text part among them), and the deltas.
    let mut seen = Vec::new();
    let mut streamed = None;
    while let Some(item) = events.next().await {
        let BusItem::Event(e) = item else {
            panic!("the test fell behind the bus: {item:?}");
        };
        match &e.event {
            Event::PartUpdated { part } => {
                if let Some(text) = text_of(part) {
                    let ended = matches!(&part.kind, PartKind::Text(t)
                        if t.time.as_ref().is_some_and(|t| t.end.is_some()));
                    let whole = Seen::Whole(Instant::now(), text.to_string(), ended);
                    seen.push((part.id.clone(), whole));
                }
            }
            Event::PartDelta {
                part_id,
                field,
                delta,
                ..
            } => {
                assert_eq!(
                    streamed.get_or_insert_with(|| part_id.clone()),
                    part_id,
                    "one part"
                );
                assert_eq!(field, "text");
                seen.push((part_id.clone(), Seen::Delta(delta.clone())));
            }
            Event::SessionIdle { session_id } if *session_id == s.id => break,
            _ => {}
        }
    }
    let streamed = streamed.expect("deltas");
    prompt.await.unwrap().unwrap();
    seen.into_iter()
        .filter(|(id, _)| *id == streamed)
        .map(|(_, s)| s)
        .collect()
}

/// Checks that every whole state holds exactly the deltas before it (a client drawing from
/// either stays right), that the first is empty and the last ended; answers the deltas.
#[track_caller]
fn check_consistent(seen: &[Seen], answer: &str) -> usize {
    let mut text = String::new();
    let mut deltas = 0;
    for item in seen {
        match item {
            Seen::Delta(d) => {
                text.push_str(d);
                deltas += 1;
            }
            Seen::Whole(_, whole, _) => assert_eq!(whole, &text, "the whole state so far"),
        }
    }
    assert_eq!(text, answer);
    assert!(
        matches!(&seen[0], Seen::Whole(_, t, false) if t.is_empty()),
        "{:?}",
        seen[0]
    );
    assert!(matches!(seen.last(), Some(Seen::Whole(_, t, true)) if t == answer));
    deltas
}

#[actix_rt::test]
async fn a_reply_streamed_at_once_publishes_far_fewer_whole_states_than_deltas() {
    let answer: String = (0..1_000).map(|n| format!("w{n} ")).collect();
    let answer = answer.trim_end().to_string();
    let seen = watch_text(Response::text(&answer)).await;
    let deltas = check_consistent(&seen, &answer);
    assert_eq!(deltas, 1_000);
    let wholes = seen.iter().filter(|s| matches!(s, Seen::Whole(..))).count();
    assert!(wholes < 50, "{wholes} whole states for 1,000 deltas");
}

#[actix_rt::test]
async fn a_slow_reply_publishes_its_whole_state_at_most_every_100_ms() {
    let answer: String = (0..40).map(|n| format!("w{n} ")).collect();
    let answer = answer.trim_end().to_string();
    let seen = watch_text(Response::text(&answer).with_delay(Duration::from_millis(20))).await;
    check_consistent(&seen, &answer);
    let times: Vec<Instant> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Whole(at, ..) => Some(*at),
            Seen::Delta(_) => None,
        })
        .collect();
    let lasted = *times.last().unwrap() - times[0];
    assert!(lasted >= Duration::from_millis(700), "{lasted:?}");
    // Between the first and the last: one at most per 100 ms (one more for a boundary), and
    // they keep coming while the text grows.
    let between = times.len() - 2;
    let most = usize::try_from(lasted.as_millis() / 100).unwrap() + 1;
    assert!(between <= most, "{between} whole states in {lasted:?}");
    assert!(between >= 3, "{between} whole states in {lasted:?}");
}

#[actix_rt::test]
async fn a_stream_that_pauses_still_publishes_its_text_so_far_whole() {
    let fake = FakeOpenAi::start(|_| {
        Response::text("thinking about it for a very long while").stall_after(3)
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    {
        let rt = rt.clone();
        let id = s.id.clone();
        tokio::spawn(async move { rt.prompt(&id, PromptInput::text("go")).await });
    }
    // Two pieces, then nothing: the whole state with both follows their deltas anyway.
    let mut deltas = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let Ok(Some(BusItem::Event(e))) = tokio::time::timeout_at(deadline, events.next()).await
        else {
            panic!("no whole state with the text so far");
        };
        match &e.event {
            Event::PartDelta { .. } => deltas += 1,
            Event::PartUpdated { part } if text_of(part) == Some("thinking about ") => {
                assert_eq!(deltas, 2);
                break;
            }
            _ => {}
        }
    }
    rt.cancel(&s.id).await.unwrap();
}
