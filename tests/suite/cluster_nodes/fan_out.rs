//! A root fanning out 300 children that land on every node of three, seen whole by an event
//! stream of one node; a root cancel through another node stopping every child; and a node
//! killed mid-run, after which the root still gets a result for every child and the database
//! holds no running call.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::postgres::TestDatabase;
use taskforce_testkit::script::{fan_out, first_user};

use super::support::{Cluster, Node, client, post, unfinished_calls, watch};

/// How many children the root starts.
const CHILDREN: usize = 300;
/// How many children each node runs at once.
const PER_NODE: usize = 100;

/// The ids of the sessions that `seen` says went idle.
/// The ids of `root`'s children, as `node` lists them.
async fn child_ids(node: &Node, root: &str) -> HashSet<String> {
    let children = node.get(&format!("/session/{root}/children")).await;
    children
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect()
}

fn idle_sessions(seen: &Mutex<Vec<Value>>) -> HashSet<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "session.idle")
        .filter_map(|e| e["properties"]["sessionID"].as_str().map(str::to_string))
        .collect()
}

/// The root's task calls as stored: how many ended in each state.
async fn task_states(db: &TestDatabase, root: &str) -> BTreeMap<String, usize> {
    let mut conn = db.connect().await;
    let rows: Vec<(String,)> = sqlx::query_as("SELECT data FROM part WHERE session_id = $1")
        .bind(root)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let mut states = BTreeMap::new();
    for (data,) in rows {
        let part: Value = serde_json::from_str(&data).unwrap();
        if part["type"] == "tool" && part["tool"] == "task" {
            let status = part["state"]["status"].as_str().unwrap_or("?").to_string();
            *states.entry(status).or_insert(0) += 1;
        }
    }
    states
}

/// Which nodes ran children, with how many model calls of children each.
fn child_calls_by_node(fake: &FakeOpenAi) -> BTreeMap<String, usize> {
    let mut by_node = BTreeMap::new();
    for request in fake.requests() {
        if first_user(&request).starts_with("child ")
            && let Some(node) = request.header("x-node")
        {
            *by_node.entry(node.to_string()).or_insert(0) += 1;
        }
    }
    by_node
}

/// Three nodes whose roots fan out to `CHILDREN` children, each answering as `child` says; at
/// most `PER_NODE` of them run at once on one node.
async fn cluster(
    test: &str,
    child: impl Fn(usize) -> Response + Send + Sync + 'static,
) -> Option<Cluster> {
    let limits = format!(
        "\n[subagent]\nmax_concurrent = {CHILDREN}\nmax_total = {PER_NODE}\nmax_per_session = 1000\n"
    );
    Cluster::start(
        test,
        &["node-a", "node-b", "node-c"],
        &limits,
        fan_out(CHILDREN, child),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_run_a_fan_out_of_300_children_and_one_nodes_stream_shows_them_all() {
    let Some(c) = cluster("nodes_fan_out", |n| {
        Response::text(&format!("answer of child {n}")).after(Duration::from_millis(200))
    })
    .await
    else {
        return;
    };
    let (a, b) = (&c.nodes[0], &c.nodes[1]);
    let seen_on_b = watch(&b.base).await;
    let root = post(&format!("{}/session", a.base), json!({})).await;
    let root_id = root["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let answer = post(
        &format!("{}/session/{root_id}/message", a.base),
        json!({"parts": [{"type": "text", "text": "fan out"}]}),
    )
    .await;
    let took = started.elapsed();
    assert!(
        answer.to_string().contains("root heard every child"),
        "{answer}"
    );
    let states = task_states(&c.db, &root_id).await;
    assert_eq!(states.get("completed"), Some(&CHILDREN), "{states:?}");
    let by_node = child_calls_by_node(&c.fake);
    eprintln!(
        "fan-out of {CHILDREN} children (200 ms each) over 3 nodes took {took:?}; children by node: {by_node:?}"
    );
    assert_eq!(by_node.len(), 3, "children ran on every node: {by_node:?}");

    // The stream of node B saw every child (wherever it ran) go idle.
    let children = child_ids(b, &root_id).await;
    assert_eq!(children.len(), CHILDREN);
    taskforce_testkit::eventually("node B's stream to show every child idle", || {
        idle_sessions(&seen_on_b).is_superset(&children)
    })
    .await;
    for node in &c.nodes {
        assert!(
            !node.log().contains("panicked"),
            "{}: {}",
            node.name,
            node.log()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_cancelled_through_another_node_stops_every_child_on_every_node() {
    let Some(c) = cluster("nodes_cancel", |n| {
        Response::text(&format!("answer of child {n}")).stall_after(1)
    })
    .await
    else {
        return;
    };
    let (a, b, cn) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    let seen_on_b = watch(&b.base).await;
    let root = post(&format!("{}/session", a.base), json!({})).await;
    let root_id = root["id"].as_str().unwrap().to_string();
    let prompt = tokio::spawn({
        let url = format!("{}/session/{root_id}/prompt_async", a.base);
        async move {
            client()
                .post(url)
                .json(&json!({"parts": [{"type": "text", "text": "fan out"}]}))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    assert!(prompt.await.unwrap().is_success());
    // Every child is running (its model call open) before the cancel.
    assert!(
        c.fake
            .wait_for_requests(CHILDREN + 1, Duration::from_secs(120))
            .await,
        "every child called its model"
    );
    let by_node = child_calls_by_node(&c.fake);
    assert_eq!(by_node.len(), 3, "children run on every node: {by_node:?}");
    let started = Instant::now();
    let cancelled = client()
        .post(format!("{}/session/{root_id}/abort", cn.base))
        .send()
        .await
        .unwrap();
    assert!(cancelled.status().is_success());
    // A child's rows reach the shared store from the node that runs it, which may still hold
    // them in its write queue when its model call is already open: the listing of another
    // node shows every child once they are there.
    taskforce_testkit::eventually_async("node A to list every child", || async {
        child_ids(a, &root_id).await.len() == CHILDREN
    })
    .await;
    let children = child_ids(a, &root_id).await;
    taskforce_testkit::eventually("every child idle, as node B's stream shows", || {
        let idle = idle_sessions(&seen_on_b);
        idle.is_superset(&children) && idle.contains(&root_id)
    })
    .await;
    eprintln!(
        "a root cancel through node C stopped {CHILDREN} children on 3 nodes ({by_node:?}); all idle after {:?}",
        started.elapsed()
    );
    taskforce_testkit::eventually_async("no call left running in the database", || async {
        unfinished_calls(&c.db).await == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_run_leaves_no_child_without_a_result_and_nothing_running() {
    let Some(mut c) = cluster("nodes_kill", |n| {
        Response::text(&format!("answer of child {n}")).after(Duration::from_secs(3))
    })
    .await
    else {
        return;
    };
    let root = post(&format!("{}/session", c.nodes[0].base), json!({})).await;
    let root_id = root["id"].as_str().unwrap().to_string();
    let prompt = tokio::spawn({
        let url = format!("{}/session/{root_id}/message", c.nodes[0].base);
        async move {
            post(
                &url,
                json!({"parts": [{"type": "text", "text": "fan out"}]}),
            )
            .await
        }
    });
    assert!(
        c.fake
            .wait_for_requests(CHILDREN + 1, Duration::from_secs(120))
            .await,
        "every child called its model"
    );
    let by_node = child_calls_by_node(&c.fake);
    assert!(by_node.get("node-c").is_some_and(|n| *n > 0), "{by_node:?}");
    // kill -9: no clean stop, its lease stays until it lapses.
    c.nodes[2].kill();
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(120), prompt)
        .await
        .expect("the root answered after the loss of a node")
        .unwrap();
    assert!(
        answer.to_string().contains("root heard every child"),
        "{answer}"
    );
    let states = task_states(&c.db, &root_id).await;
    let results: usize = states.values().sum();
    assert_eq!(results, CHILDREN, "a result for every child: {states:?}");
    assert!(
        states.get("error").copied().unwrap_or(0) <= by_node["node-c"],
        "only children of the lost node failed: {states:?}"
    );
    taskforce_testkit::eventually_async("no call left running in the database", || async {
        unfinished_calls(&c.db).await == 0
    })
    .await;
    eprintln!(
        "node C killed with {} of its children running ({by_node:?}): the root answered {:?} later with {states:?}",
        by_node["node-c"],
        started.elapsed()
    );
}
