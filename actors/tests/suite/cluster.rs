//! Two runtimes joined in one cluster over a real NATS JetStream (`TASKFORCE_TEST_NATS_URL`):
//! each has its own data directory; events of one reach the other's bus in order, with the
//! parent links of children, and each holds a lease in the nodes bucket.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter, ToastVariant};
use taskforce_actors::cluster::read_status;
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::config::ClusterConfig;
use taskforce_testkit::fake_openai::FakeOpenAi;
use taskforce_testkit::nats::TestNats;
use taskforce_testkit::proxy::CutProxy;
use taskforce_testkit::script::delegating;
use taskforce_testkit::{eventually, eventually_async};

use super::runtime::Env;

const GENERAL: &str =
    r#"{"description":"Look around","prompt":"Find the answer","subagent_type":"general"}"#;

/// A project joined to `nats`'s cluster as `node`, with models from `fake`.
fn node_env(fake: &FakeOpenAi, nats: &TestNats, node: &str, lease: &str) -> Env {
    Env::new(&fake.base_url(), &nats.cluster_toml(node, lease))
}

async fn node(env: &Env) -> Runtime {
    let mut options = env.options();
    options.cluster = true;
    Runtime::start(options).await.unwrap()
}

/// Every event a subscription sees, as JSON, kept as it comes.
fn record(rt: &Runtime) -> Arc<Mutex<Vec<serde_json::Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut events = rt.subscribe(Filter::All);
    let keep = seen.clone();
    tokio::spawn(async move {
        while let Some(item) = events.next().await {
            if let BusItem::Event(envelope) = item {
                let json = serde_json::to_value(&envelope.event).unwrap();
                keep.lock().unwrap().push(json);
            }
        }
    });
    seen
}

#[actix_rt::test]
async fn a_session_on_one_node_streams_its_events_and_its_childs_to_another_nodes_bus_in_order() {
    let Some(nats) = TestNats::fresh("bridge_order") else {
        return;
    };
    let fake = FakeOpenAi::start(delegating(GENERAL, "child found it", "parent done"))
        .await
        .unwrap();
    let (env_a, env_b) = (
        node_env(&fake, &nats, "node-a", "10s"),
        node_env(&fake, &nats, "node-b", "10s"),
    );
    let a = node(&env_a).await;
    let b = node(&env_b).await;
    let seen_on_a = record(&a);
    let seen_on_b = record(&b);
    let mut subtree_on_b = None;

    let root = a.create_session(None, None).await.unwrap();
    subtree_on_b.get_or_insert_with(|| b.subscribe(Filter::Subtree(root.id.clone())));
    a.prompt(&root.id, PromptInput::text("delegate"))
        .await
        .unwrap();
    let stored = a
        .cluster()
        .unwrap()
        .published(Duration::from_secs(30))
        .await;
    assert!(stored.is_some_and(|seq| seq > 0), "A's events are stored");

    eventually("node B to have every event of node A", || {
        seen_on_b.lock().unwrap().len() >= seen_on_a.lock().unwrap().len()
    })
    .await;
    let on_a = seen_on_a.lock().unwrap().clone();
    let on_b = seen_on_b.lock().unwrap().clone();
    assert_eq!(on_a, on_b, "the same events in the same order");
    assert!(on_b.iter().any(|e| e["type"] == "message.part.updated"));

    // B learned the child's parent from its `session.created`: a subtree subscription on B
    // follows the child too.
    let child = a.children(&root.id).await.unwrap().remove(0);
    let mut subtree = subtree_on_b.unwrap();
    let mut sessions = std::collections::HashSet::new();
    while let Some(Some(BusItem::Event(envelope))) =
        tokio::time::timeout(Duration::from_secs(1), subtree.next())
            .await
            .ok()
            .flatten()
            .map(Some)
    {
        if let Some(id) = envelope.event.session_id() {
            sessions.insert(id.clone());
        }
        if sessions.contains(&child.id) && sessions.contains(&root.id) {
            break;
        }
    }
    assert!(
        sessions.contains(&child.id),
        "the child's events pass B's subtree filter"
    );

    // Nothing went back: A's bus saw no event twice.
    let created = on_a
        .iter()
        .filter(|e| e["type"] == "session.created")
        .count();
    assert_eq!(created, 2);
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn each_node_holds_a_lease_until_it_stops_and_a_lease_not_renewed_expires() {
    let Some(nats) = TestNats::fresh("leases") else {
        return;
    };
    let fake = FakeOpenAi::start(delegating(GENERAL, "child", "parent"))
        .await
        .unwrap();
    let a = node(&node_env(&fake, &nats, "node-a", "1s")).await;
    let b = node(&node_env(&fake, &nats, "node-b", "1s")).await;
    let config = ClusterConfig {
        nats: Some(nats.url.clone()),
        prefix: nats.prefix.clone(),
        ..Default::default()
    };
    let names = |status: &taskforce_actors::cluster::ClusterStatus| -> Vec<(String, bool)> {
        status
            .nodes
            .iter()
            .map(|n| (n.info.node.clone(), n.expired))
            .collect()
    };
    let read = || {
        let config = config.clone();
        async move { read_status(&config).await.unwrap() }
    };
    eventually_async("both leases", || async {
        names(&read().await) == [("node-a".into(), false), ("node-b".into(), false)]
    })
    .await;
    let status = read().await;
    let a_info = &status.nodes[0].info;
    assert_eq!(a_info.load.slots_capacity, 64);
    assert!(a_info.nats.connected);

    // A clean stop gives the lease back.
    b.stop(Duration::from_secs(5)).await;
    eventually_async("node B's lease gone", || async {
        names(&read().await) == [("node-a".into(), false)]
    })
    .await;

    // A node that stops renewing its lease is shown as expired once its lease has lapsed.
    a.cluster().unwrap().stop_heartbeat();
    eventually_async("node A's lease expired", || async {
        names(&read().await) == [("node-a".into(), true)]
    })
    .await;
    a.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn a_node_stopping_while_it_renews_its_lease_leaves_no_lease_behind() {
    let Some(nats) = TestNats::fresh("leave_renewing") else {
        return;
    };
    let fake = FakeOpenAi::start(delegating(GENERAL, "child", "parent"))
        .await
        .unwrap();
    // Renewed every millisecond, a lease is nearly always being written when the node stops.
    let toml = nats
        .cluster_toml("node-a", "10s")
        .replace("heartbeat = \"100ms\"", "heartbeat = \"1ms\"");
    let env = Env::new(&fake.base_url(), &toml);
    let config = ClusterConfig {
        nats: Some(nats.url.clone()),
        prefix: nats.prefix.clone(),
        ..Default::default()
    };
    for round in 0..10 {
        let rt = node(&env).await;
        eventually_async("the node's lease", || async {
            !read_status(&config).await.unwrap().nodes.is_empty()
        })
        .await;
        rt.stop(Duration::from_secs(5)).await;
        let left = read_status(&config).await.unwrap().nodes;
        assert!(left.is_empty(), "round {round}: {left:?}");
    }
}

#[actix_rt::test]
async fn joining_without_a_nats_url_names_the_key() {
    let env = Env::new("http://127.0.0.1:9", "");
    let mut options = env.options();
    options.cluster = true;
    let err = Runtime::start(options)
        .await
        .err()
        .expect("no cluster without NATS");
    assert!(matches!(err, RuntimeError::Cluster(_)));
    assert!(err.to_string().contains("[cluster] nats"), "{err}");
}

#[actix_rt::test]
async fn a_node_that_loses_nats_for_a_while_sends_what_it_published_meanwhile_and_says_it_was_cut_off()
 {
    let Some(nats) = TestNats::fresh("reconnect") else {
        return;
    };
    let proxy = CutProxy::start(&nats.url).await;
    let fake = FakeOpenAi::start(delegating(GENERAL, "child", "parent"))
        .await
        .unwrap();
    // Node A reaches NATS through the proxy; node B directly.
    let behind = nats.cluster_toml_via(&proxy.url, "node-a", "10s");
    let a = node(&Env::new(&fake.base_url(), &behind)).await;
    let b = node(&node_env(&fake, &nats, "node-b", "10s")).await;
    let seen_on_b = record(&b);
    let toast = |n: usize| Event::TuiToastShow {
        title: None,
        message: format!("toast {n}"),
        variant: ToastVariant::Info,
        duration: None,
    };
    a.publish(toast(0));
    let cluster = a.cluster().unwrap().clone();
    eventually("the first toast stored", || cluster.bridge().published >= 1).await;

    proxy.cut();
    eventually("node A to notice", || !cluster.connection().connected).await;
    for n in 1..=50 {
        a.publish(toast(n));
    }
    proxy.restore();
    eventually("node A back", || cluster.connection().connected).await;
    eventually("node B to get every toast", || {
        seen_on_b.lock().unwrap().len() >= 51
    })
    .await;
    let messages: Vec<String> = seen_on_b
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            e["properties"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let want: Vec<String> = (0..=50).map(|n| format!("toast {n}")).collect();
    assert_eq!(messages, want, "every toast once, in order");
    let status = cluster.connection();
    assert_eq!(status.disconnects, 1);
    assert!(status.last_disconnected.is_some() && status.last_reconnected.is_some());
    // B may have every toast before A has counted the acknowledgements of the last ones.
    eventually("node A to count every toast acknowledged", || {
        cluster.bridge().pending == 0
    })
    .await;
    let bridge = cluster.bridge();
    assert_eq!(
        (bridge.published, bridge.pending, bridge.missed),
        (51, 0, 0)
    );
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}
