//! Streamed text on the wire: `message.part.delta` events with OpenCode's five properties,
//! between whole `message.part.updated` states of the part.

use std::time::Duration;

use serde_json::json;

use super::{Frame, Sse, harness, id_of};
use taskforce_testkit::fake_openai::Response;

/// The frames of one prompt's answer on `/event`, up to the session's `session.idle`.
async fn answer_frames(reply: Response) -> Vec<Frame> {
    let h = harness().start(move |_| reply.clone()).await;
    let mut events = Sse::open(&h, "/event", None).await;
    events.next().await;
    let s = id_of(&h.session(json!({ "title": "streamed" })).await);
    h.prompt(&s, "go").await;
    events.until(|f| f.is("session.idle", &s)).await
}

/// The id of the part the deltas extend (there is one streamed part).
fn streamed_part(frames: &[Frame]) -> String {
    frames
        .iter()
        .find(|f| f.kind() == "message.part.delta")
        .map(|f| f.properties()["partID"].as_str().unwrap().to_string())
        .expect("a delta")
}

/// The text a client draws from `frames` for `part`: a whole state replaces it, a delta
/// extends it. Checks on the way that no whole state lags the deltas already drawn (a client
/// that fell behind may get a newer whole state instead of the deltas it supersedes); answers
/// the text and the whole states.
#[track_caller]
fn draw(frames: &[Frame], part: &str) -> (String, Vec<serde_json::Value>) {
    let mut text = String::new();
    let mut wholes = Vec::new();
    for frame in frames {
        let p = frame.properties();
        match frame.kind() {
            "message.part.delta" if p["partID"] == part => {
                text.push_str(p["delta"].as_str().unwrap());
            }
            "message.part.updated" if p["part"]["id"] == part => {
                assert!(p.get("delta").is_none(), "whole states carry no delta");
                let whole = p["part"]["text"].as_str().unwrap();
                assert!(whole.starts_with(&text), "{frame:?} after {text:?}");
                text = whole.to_string();
                wholes.push(p["part"].clone());
            }
            _ => {}
        }
    }
    (text, wholes)
}

#[tokio::test(flavor = "multi_thread")]
async fn text_streams_as_deltas_between_whole_states_of_its_part() {
    // Pieces apart in time, so that a client reads each delta before the end supersedes it.
    let reply = Response::text("streamed in four pieces").with_delay(Duration::from_millis(20));
    let frames = answer_frames(reply).await;
    let part = streamed_part(&frames);
    for frame in frames.iter().filter(|f| f.kind() == "message.part.delta") {
        let p = frame.properties();
        let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["sessionID", "messageID", "partID", "field", "delta"],
            "{frame:?}"
        );
        assert_eq!(p["partID"], part.as_str());
        assert_eq!(p["field"], "text");
        assert!(p["sessionID"].as_str().unwrap().starts_with("ses_"));
        assert!(p["messageID"].as_str().unwrap().starts_with("msg_"));
        assert!(!p["delta"].as_str().unwrap().is_empty());
    }
    let (text, wholes) = draw(&frames, &part);
    assert_eq!(text, "streamed in four pieces");
    // Whole at the end, with its end time.
    let last = wholes.last().unwrap();
    assert_eq!(last["text"], "streamed in four pieces");
    assert!(last["time"]["end"].is_u64(), "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_of_1000_deltas_sends_far_fewer_whole_states() {
    let answer: String = (0..1_000).map(|n| format!("w{n} ")).collect();
    let answer = answer.trim_end();
    let frames = answer_frames(Response::text(answer)).await;
    let part = streamed_part(&frames);
    let (text, wholes) = draw(&frames, &part);
    assert_eq!(text, answer);
    let deltas = frames
        .iter()
        .filter(|f| f.kind() == "message.part.delta")
        .count();
    // Deltas reach a client that keeps up (not the ones a newer whole state superseded
    // before it read them).
    assert!(deltas > 0);
    assert!(
        wholes.len() < 50,
        "{} whole states for 1,000 deltas",
        wholes.len()
    );
}
