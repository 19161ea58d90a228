//! The event streams: first frame, ids, the global flavor, heartbeats, `Last-Event-ID` replay
//! and resync.

use std::time::Duration;

use serde_json::json;
use taskforce_testkit::fake_openai::Response;

use super::{EventId, Frame, Harness, Sse, answers, harness, id_of};

/// Creates a session titled `title`; answers its id.
pub(super) async fn create(h: &Harness, title: &str) -> String {
    id_of(&h.session(json!({ "title": title })).await)
}

/// Reads `stream` up to the `session.updated` of `session` (created or patched).
pub(super) async fn through_update(stream: &mut Sse, session: &str) -> Vec<Frame> {
    stream.until(|f| f.is("session.updated", session)).await
}

#[track_caller]
fn consecutive(frames: &[Frame]) -> Vec<EventId> {
    let ids: Vec<EventId> = frames
        .iter()
        .map(|f| {
            f.id.unwrap_or_else(|| panic!("an event frame has an id: {f:?}"))
        })
        .collect();
    // Ids only go up: a client that falls behind may find a part's older whole state replaced
    // by its newer one in the ring, so a number can be skipped, never repeated.
    for pair in ids.windows(2) {
        assert!(
            pair[1].epoch == pair[0].epoch && pair[1].seq > pair[0].seq,
            "ids go up: {ids:?}"
        );
    }
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn the_event_stream_starts_connected_then_numbers_every_event() {
    let h = harness().start(answers("streamed answer")).await;
    let mut events = Sse::open(&h, "/event", None).await;
    assert_eq!(
        events.next().await,
        Frame {
            id: None,
            data: json!({"type": "server.connected", "properties": {}})
        }
    );
    let s = create(&h, "watched").await;
    let frames = through_update(&mut events, &s).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0].kind(), "session.created");
    assert_eq!(frames[0].properties()["info"]["title"], "watched");
    assert_eq!(frames[0].properties()["info"]["id"], s.as_str());
    let mut ids = consecutive(&frames);

    h.prompt(&s, "hello").await;
    let more = events.until(|f| f.is("session.idle", &s)).await;
    ids.extend(consecutive(&more));
    consecutive(&[frames, more.clone()].concat());
    for frame in &more {
        let keys: Vec<&String> = frame.data.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["type", "properties"], "{frame:?}");
    }
    assert!(more.iter().any(|f| {
        f.kind() == "message.part.updated" && f.properties()["part"]["text"] == "streamed answer"
    }));
    assert!(ids[0].seq >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_global_stream_wraps_the_same_events_with_the_directory() {
    let h = harness().start(answers("unused")).await;
    let mut local = Sse::open(&h, "/event", None).await;
    let mut global = Sse::open(&h, "/global/event", None).await;
    local.next().await;
    assert_eq!(
        global.next().await,
        Frame {
            id: None,
            data: json!({"payload": {"type": "server.connected", "properties": {}}})
        }
    );
    let s = create(&h, "seen twice").await;
    let from_local = through_update(&mut local, &s).await;
    let from_global = through_update(&mut global, &s).await;
    assert_eq!(from_global.len(), from_local.len());
    let directory = h.runtime.paths().project_root.display().to_string();
    for (g, l) in from_global.iter().zip(&from_local) {
        assert_eq!(g.id, l.id, "the same event has the same id on both streams");
        assert_eq!(
            g.data,
            json!({"directory": directory, "payload": l.data}),
            "{g:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeats_arrive_on_the_configured_period() {
    let h = harness()
        .options(|o| o.heartbeat = Duration::from_millis(150))
        .start(answers("unused"))
        .await;
    let mut local = Sse::open(&h, "/event", None).await;
    let mut global = Sse::open(&h, "/global/event", None).await;
    local.next().await;
    global.next().await;
    for _ in 0..2 {
        let beat = local
            .next_within(Duration::from_secs(3))
            .await
            .expect("a heartbeat");
        assert_eq!(
            beat,
            Frame {
                id: None,
                data: json!({"type": "server.heartbeat", "properties": {}})
            }
        );
        let beat = global
            .next_within(Duration::from_secs(3))
            .await
            .expect("a heartbeat");
        assert_eq!(
            beat,
            Frame {
                id: None,
                data: json!({"payload": {"type": "server.heartbeat", "properties": {}}})
            }
        );
    }
    // Events still come between heartbeats, numbered.
    let s = create(&h, "between beats").await;
    let frames = local.until(|f| f.is("session.created", &s)).await;
    assert!(frames.last().unwrap().id.is_some());
    assert!(
        frames
            .iter()
            .all(|f| f.kind() == "server.heartbeat" || f.id.is_some())
    );
}

/// The part a `message.part.updated` or `message.part.delta` frame is about.
fn part_of(frame: &Frame) -> Option<&str> {
    match frame.kind() {
        "message.part.updated" => frame.properties()["part"]["id"].as_str(),
        "message.part.delta" => frame.properties()["partID"].as_str(),
        _ => None,
    }
}

/// `frames` without the part states and deltas a later whole state of their part supersedes
/// (what a replay leaves out).
pub(super) fn without_superseded(frames: &[Frame]) -> Vec<Frame> {
    frames
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            let Some(part) = part_of(f) else {
                return true;
            };
            !frames[i + 1..]
                .iter()
                .any(|later| later.kind() == "message.part.updated" && part_of(later) == Some(part))
        })
        .map(|(_, f)| f.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn reconnecting_with_last_event_id_replays_the_missed_events_but_superseded_part_states() {
    // The answer's pieces apart in time: the witness reads their deltas before the end
    // supersedes them.
    let h = harness()
        .start(|_| Response::text("replayed answer").with_delay(Duration::from_millis(20)))
        .await;
    // The witness stays connected and sees everything.
    let mut witness = Sse::open(&h, "/event", None).await;
    witness.next().await;

    let mut client = Sse::open(&h, "/event", None).await;
    client.next().await;
    let first = create(&h, "before the drop").await;
    let seen = through_update(&mut client, &first).await;
    let last_seen = seen.last().unwrap().id.unwrap();
    drop(client);

    // While the client is away: sessions, a patch, a whole prompt.
    let second = create(&h, "while away").await;
    h.patch(
        &format!("/session/{first}"),
        json!({"title": "renamed while away"}),
    )
    .await
    .ok();
    h.prompt(&second, "hi").await;
    let marker = create(&h, "last missed").await;
    let everything = through_update(&mut witness, &marker).await;
    let missed: Vec<Frame> = everything
        .into_iter()
        .filter(|f| f.id.unwrap() > last_seen)
        .collect();
    assert!(missed.len() > 8, "{missed:?}");
    assert_eq!(missed[0].id, Some(last_seen + 1));
    let marker_id = missed.last().unwrap().id.unwrap();
    // The answer streamed as deltas between whole states of its part: those are superseded by
    // its final state.
    let expected = without_superseded(&missed);
    assert!(
        missed.iter().any(|f| f.kind() == "message.part.delta"),
        "{missed:?}"
    );
    assert!(expected.len() < missed.len());
    assert!(expected.iter().any(|f| {
        f.kind() == "message.part.updated" && f.properties()["part"]["text"] == "replayed answer"
    }));
    // What the witness saw after the marker.
    let mut later: Vec<Frame> = Vec::new();

    for path in ["/event", "/global/event"] {
        let mut back = Sse::open(&h, path, Some(last_seen)).await;
        assert_eq!(back.next().await.kind(), "server.connected");
        let replayed = through_update(&mut back, &marker).await;
        let ids: Vec<Option<EventId>> = replayed.iter().map(|f| f.id).collect();
        let want: Vec<Option<EventId>> = expected.iter().map(|f| f.id).collect();
        assert_eq!(
            ids, want,
            "{path}: the missed ids, superseded ones left out"
        );
        for (got, want) in replayed.iter().zip(&expected) {
            let payload = if path == "/event" {
                &got.data
            } else {
                &got.data["payload"]
            };
            assert_eq!(payload, &want.data);
        }

        // Then live events follow without a duplicate or a gap.
        let after = create(&h, &format!("after reconnecting to {path}")).await;
        let live = through_update(&mut back, &after).await;
        later.extend(through_update(&mut witness, &after).await);
        assert_eq!(
            live.iter().map(|f| f.id).collect::<Vec<_>>(),
            later.iter().map(|f| f.id).collect::<Vec<_>>(),
            "{path}: every event after the marker, once"
        );
        assert_eq!(live[0].id, Some(marker_id + 1));
    }

    // Nothing missed: a reconnect at the newest id gets only live events.
    let newest = create(&h, "newest").await;
    let newest_id = through_update(&mut witness, &newest)
        .await
        .last()
        .unwrap()
        .id
        .unwrap();
    let mut current = Sse::open(&h, "/event", Some(newest_id)).await;
    assert_eq!(current.next().await.kind(), "server.connected");
    assert!(
        current
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "nothing to replay"
    );
    let later = create(&h, "later").await;
    let frames = through_update(&mut current, &later).await;
    assert_eq!(frames[0].id, Some(newest_id + 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_id_older_than_the_replay_ring_gets_a_resync() {
    // Room for a few session events only.
    let h = harness()
        .options(|o| o.replay_bytes = 4096)
        .start(answers("unused"))
        .await;
    let mut witness = Sse::open(&h, "/event", None).await;
    witness.next().await;
    let first = create(&h, "first").await;
    let old = through_update(&mut witness, &first).await[0].id.unwrap();
    for n in 0..10 {
        let s = create(&h, &format!("filler {n}")).await;
        through_update(&mut witness, &s).await;
    }

    for (path, resync) in [
        ("/event", "/properties/reason"),
        ("/global/event", "/payload/properties/reason"),
    ] {
        let mut back = Sse::open(&h, path, Some(old)).await;
        assert_eq!(back.next().await.kind(), "server.connected");
        let frame = back.next().await;
        assert_eq!(frame.kind(), "server.resync", "{frame:?}");
        assert_eq!(frame.id, None);
        assert!(frame.data.pointer(resync).unwrap().is_string(), "{frame:?}");
        // Live events follow the resync.
        let s = create(&h, &format!("after resync on {path}")).await;
        let witnessed = through_update(&mut witness, &s).await;
        let live = through_update(&mut back, &s).await;
        assert_eq!(
            live.iter().map(|f| f.id).collect::<Vec<_>>(),
            witnessed.iter().map(|f| f.id).collect::<Vec<_>>()
        );
    }

    // An id the server never sent is a resync too: a number not given out yet, an id of
    // another server run, and no id at all.
    let future = EventId {
        seq: 1_000_000,
        ..old
    };
    let other_run = EventId {
        epoch: old.epoch + 1,
        ..old
    };
    for last in [future.to_string(), other_run.to_string(), "42".to_string()] {
        let mut back = Sse::open_raw(&h, "/event", Some(&last)).await;
        back.next().await;
        assert_eq!(back.next().await.kind(), "server.resync", "{last}");
    }

    // The ring still has the newest events: a recent id replays without a resync.
    let s = create(&h, "recent").await;
    let recent = through_update(&mut witness, &s).await;
    let from = recent[0].id.unwrap() - 1;
    let mut back = Sse::open(&h, "/event", Some(from)).await;
    back.next().await;
    let replayed = through_update(&mut back, &s).await;
    assert_eq!(
        replayed.iter().map(|f| f.id).collect::<Vec<_>>(),
        recent.iter().map(|f| f.id).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_id_from_before_a_restart_gets_a_resync() {
    let h = harness().start(answers("unused")).await;
    let mut before = Sse::open(&h, "/event", None).await;
    before.next().await;
    let s = create(&h, "before the restart").await;
    let old = through_update(&mut before, &s)
        .await
        .last()
        .unwrap()
        .id
        .unwrap();
    drop(before);

    // The new run numbers its events from 1 again: without the epoch, `old` would name one
    // of its events.
    let h = h.restart().await;
    let mut watcher = Sse::open(&h, "/event", None).await;
    watcher.next().await;
    let mut fresh = Vec::new();
    while fresh.last().is_none_or(|id: &EventId| id.seq <= old.seq) {
        let s = create(&h, "after the restart").await;
        fresh.extend(
            through_update(&mut watcher, &s)
                .await
                .iter()
                .filter_map(|f| f.id),
        );
    }

    let mut back = Sse::open(&h, "/event", Some(old)).await;
    assert_eq!(back.next().await.kind(), "server.connected");
    let frame = back.next().await;
    assert_eq!(frame.kind(), "server.resync", "{frame:?}");
    assert!(fresh.iter().all(|id| id.epoch > old.epoch), "{fresh:?}");
}
