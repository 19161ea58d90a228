//! Servers of a cluster (each on a runtime of its own, joined over the NATS of
//! `TASKFORCE_TEST_NATS_URL`): an SSE client of any node sees every node's events under the
//! same ids, and resumes with `Last-Event-ID` on another node with nothing missed and nothing
//! twice, from that node's ring or, when the ring does not hold them, from the stream.

use std::time::Duration;

use taskforce_testkit::nats::TestNats;

use super::sse::{create, through_update, without_superseded};
use super::{EventId, Frame, Sse, answers, harness};

/// The ids of `frames`.
fn ids(frames: &[Frame]) -> Vec<Option<EventId>> {
    frames.iter().map(|f| f.id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_of_one_node_sees_another_nodes_events_and_resumes_on_any_node() {
    let Some(nats) = TestNats::fresh("sse_resume") else {
        return;
    };
    let a = harness()
        .node(nats.cluster_toml("node-a", "10s"))
        .start(|_| {
            taskforce_testkit::fake_openai::Response::text("answered on node A")
                .with_delay(Duration::from_millis(5))
        })
        .await;
    let b = harness()
        .node(nats.cluster_toml("node-b", "10s"))
        .start(answers("answered on node B"))
        .await;
    let mut witness = Sse::open(&a, "/event", None).await;
    assert_eq!(witness.next().await.kind(), "server.connected");
    let mut on_b = Sse::open(&b, "/event", None).await;
    assert_eq!(on_b.next().await.kind(), "server.connected");

    // A session of node A, seen by node B's client under the ids node A's client sees.
    let first = create(&a, "made on node A").await;
    let seen = through_update(&mut on_b, &first).await;
    assert_eq!(seen[0].kind(), "session.created");
    let witnessed = through_update(&mut witness, &first).await;
    assert_eq!(ids(&seen), ids(&witnessed));
    assert_eq!(
        seen.iter().map(|f| &f.data).collect::<Vec<_>>(),
        witnessed.iter().map(|f| &f.data).collect::<Vec<_>>()
    );
    let last_seen = seen.last().unwrap().id.unwrap();
    drop(on_b);

    // While the client is away, node A answers a prompt.
    a.prompt(&first, "hello").await;
    let marker = create(&a, "last missed").await;
    let missed: Vec<Frame> = through_update(&mut witness, &marker).await;
    assert_eq!(missed[0].id, Some(last_seen + 1), "nothing between");
    assert!(missed.iter().any(|f| f.kind() == "message.part.delta"));

    // Back on node A: its ring holds everything since (superseded part states left out).
    let mut back = Sse::open(&a, "/event", Some(last_seen)).await;
    assert_eq!(back.next().await.kind(), "server.connected");
    let replayed = through_update(&mut back, &marker).await;
    let expected = without_superseded(&missed);
    assert_eq!(ids(&replayed), ids(&expected));

    // A node started since holds none of it in its ring: it reads the stream, every event
    // once, then goes on live.
    let c = harness()
        .node(nats.cluster_toml("node-c", "10s"))
        .start(answers("answered on node C"))
        .await;
    let mut on_c = Sse::open(&c, "/event", Some(last_seen)).await;
    assert_eq!(on_c.next().await.kind(), "server.connected");
    let from_stream = through_update(&mut on_c, &marker).await;
    assert_eq!(
        ids(&from_stream),
        ids(&missed),
        "every missed event, once, in order"
    );
    assert_eq!(
        from_stream.iter().map(|f| &f.data).collect::<Vec<_>>(),
        missed.iter().map(|f| &f.data).collect::<Vec<_>>()
    );
    let after = create(&b, "made on node B").await;
    let live = through_update(&mut on_c, &after).await;
    let witnessed = through_update(&mut witness, &after).await;
    assert_eq!(ids(&live), ids(&witnessed));
    assert_eq!(live[0].id, Some(missed.last().unwrap().id.unwrap() + 1));

    // Every node is listed, with the address it serves on (once its lease has it).
    let want = [
        ("node-a", a.base.as_str()),
        ("node-b", b.base.as_str()),
        ("node-c", c.base.as_str()),
    ];
    let nodes = |status: &serde_json::Value| -> Vec<(String, String)> {
        status["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let text = |key: &str| n[key].as_str().unwrap_or_default().to_string();
                (text("node"), text("address"))
            })
            .collect()
    };
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, a)| (n.to_string(), a.to_string()))
        .collect();
    let status = c.poll("/cluster/status", |s| nodes(s) == want).await;
    assert_eq!(status["this_node"], "node-c");
    assert_eq!(status["nodes"][0]["expired"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_not_in_a_cluster_answers_cluster_status_with_404() {
    let h = harness().start(answers("x")).await;
    let message = h.get("/cluster/status").await.error(404, "NotFoundError");
    assert!(message.contains("--cluster"), "{message}");
}
