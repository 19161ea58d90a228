//! Cluster nodes from the command line: `taskforce serve --cluster` processes joined over the
//! NATS of `TASKFORCE_TEST_NATS_URL`, `taskforce cluster status` reading their leases, and
//! the configuration mistakes named by their key.

use taskforce_testkit::nats::TestNats;

use super::support::{Sandbox, interrupt, spawn_serve_with};

/// A project whose config joins `nats`'s cluster as `node` (with the scripted model).
fn node(nats: &TestNats, node: &str) -> Sandbox {
    let s = Sandbox::new();
    s.file(
        "taskforce.toml",
        &format!(
            "model = \"scripted/echo\"\n{}",
            nats.cluster_toml(node, "10s")
        ),
    );
    s
}

/// The node names and whether each lease expired, from `cluster status --json` in `s`.
fn listed(s: &Sandbox) -> Vec<(String, bool)> {
    let status = s.ok(&["cluster", "status", "--json"]).json();
    status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap().to_string(),
                n["expired"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_status_lists_the_serving_nodes_and_drops_one_that_stops() {
    let Some(nats) = TestNats::fresh("cli_status") else {
        return;
    };
    let (a, b) = (node(&nats, "node-a"), node(&nats, "node-b"));
    let (serve_a, base_a) = spawn_serve_with(&a, &["--cluster"]).await;
    let (serve_b, _) = spawn_serve_with(&b, &["--cluster"]).await;
    let both = vec![("node-a".to_string(), false), ("node-b".to_string(), false)];
    taskforce_testkit::eventually("both nodes listed", || listed(&a) == both).await;
    // A node's address reaches its lease with the renewal after its server listens.
    taskforce_testkit::eventually("node A's address in its lease", || {
        a.ok(&["cluster", "status"]).stdout.contains(&base_a)
    })
    .await;
    let text = a.ok(&["cluster", "status"]).stdout;
    assert!(
        text.starts_with(&format!("cluster {}: 2 node(s)", nats.prefix)),
        "{text}"
    );
    assert!(
        text.contains("node-a") && text.contains("live") && text.contains(&base_a),
        "{text}"
    );

    // Ctrl-C stops node B cleanly: it gives its lease back.
    let out = interrupt(serve_b).await;
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    taskforce_testkit::eventually("node B gone", || {
        listed(&a) == [("node-a".to_string(), false)]
    })
    .await;
    interrupt(serve_a).await;
}

#[test]
fn cluster_mistakes_are_named_by_their_key() {
    let s = Sandbox::new();
    s.file("taskforce.toml", "model = \"scripted/echo\"\n");
    let err = s.usage_error(&["serve", "--port", "0", "--cluster"]);
    assert!(err.contains("[cluster] nats is not set"), "{err}");
    let err = s.usage_error(&["cluster", "status"]);
    assert!(err.contains("[cluster] nats is not set"), "{err}");

    s.file(
        "taskforce.toml",
        "model = \"scripted/echo\"\n[cluster]\nnats = \"nats://127.0.0.1:4222\"\nprefix = \"my.cluster\"\n",
    );
    let err = s.usage_error(&["cluster", "status"]);
    assert!(
        err.contains("cluster.prefix") && err.contains("my.cluster"),
        "{err}"
    );

    s.file(
        "taskforce.toml",
        "model = \"scripted/echo\"\n[cluster]\nenabled = true\n",
    );
    let err = s.usage_error(&["serve", "--port", "0"]);
    assert!(err.contains("cluster.nats"), "{err}");
}
