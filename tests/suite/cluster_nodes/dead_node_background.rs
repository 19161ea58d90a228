//! A node killed while a background child of one of its roots runs: a survivor records the
//! child as interrupted, with its output so far, and delivers that result into the root, whose
//! turn on it then runs on a survivor.

use std::time::Instant;

use serde_json::Value;
use taskforce_testkit::eventually_async;
use taskforce_testkit::fake_openai::{RecordedRequest, Response};
use taskforce_testkit::script::{is_child, last_content, task_call};

use super::support::{Cluster, Node, unfinished_calls};

/// The root's task call: a child started in the background.
const BACKGROUND: &str =
    r#"{"description":"Dig","prompt":"Dig deep","subagent_type":"general","background":true}"#;
/// What the child says before its model stalls.
const SO_FAR: &str = "dug two";
/// The root's answer to the delivered result.
const READ: &str = "the root read the interrupted dig";

/// The child says a few words and never finishes; the root starts it in the background, says
/// so, and answers its delivered result with [`READ`].
fn digging(req: &RecordedRequest) -> Response {
    if is_child(req) {
        // The role, then two words; then the stream stalls.
        return Response::text("dug two metres of clay").stall_after(3);
    }
    if req.last_role() == Some("user") && last_content(req).contains("<task_result ") {
        return Response::text(READ);
    }
    if req.last_role() == Some("user") {
        return task_call(BACKGROUND);
    }
    Response::text("started the dig")
}

/// The text parts of `message`, joined.
fn text_of(message: &Value) -> String {
    message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// The synthetic `<task_result …>` texts of `history`'s user messages, each with the index of
/// its message.
fn deliveries(history: &[Value]) -> Vec<(usize, String)> {
    history
        .iter()
        .enumerate()
        .filter(|(_, m)| m["info"]["role"] == "user")
        .flat_map(|(i, m)| {
            m["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["type"] == "text" && p["synthetic"] == true)
                .filter_map(|p| p["text"].as_str())
                .filter(|t| t.starts_with("<task_result "))
                .map(move |t| (i, t.to_string()))
        })
        .collect()
}

/// Whether an assistant message after the `at`-th of `history` has finished saying [`READ`].
fn answered_after(history: &[Value], at: usize) -> bool {
    history.iter().skip(at + 1).any(|m| {
        m["info"]["role"] == "assistant"
            && m["info"]["time"]["completed"].is_u64()
            && text_of(m).contains(READ)
    })
}

/// `session`'s messages, as node `node` reads them.
async fn history(node: &Node, session: &str) -> Vec<Value> {
    node.get(&format!("/session/{session}/message"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// Whether the background record of `child` is marked delivered in the database.
async fn delivered(c: &Cluster, child: &str) -> bool {
    let mut conn = c.db.connect().await;
    let row: Option<(bool,)> =
        sqlx::query_as("SELECT delivered FROM background_task WHERE child_id = $1")
            .bind(child)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
    row.is_some_and(|(delivered,)| delivered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_delivers_the_result_of_a_killed_nodes_background_child_into_its_root() {
    let Some(mut c) = Cluster::start(
        "nodes_dead_background",
        &["node-a", "node-b", "node-c"],
        "",
        digging,
    )
    .await
    else {
        return;
    };
    let root = c.nodes[2].new_session().await;
    c.nodes[2]
        .prompt_async(&root, "dig in the background")
        .await;

    // The root's turn has ended on node C with its child still running there, its first words
    // on disk: node A reads them from the shared store.
    let a = &c.nodes[0];
    let first_child = || async {
        let children = a.get(&format!("/session/{root}/children")).await;
        children[0]["id"].as_str().map(str::to_string)
    };
    eventually_async(
        "the root's turn ended and its child's first words stored",
        || async {
            let said = history(a, &root).await.iter().any(|m| {
                m["info"]["time"]["completed"].is_u64() && text_of(m).contains("started the dig")
            });
            let Some(child) = first_child().await else {
                return false;
            };
            said && history(a, &child)
                .await
                .iter()
                .any(|m| text_of(m).contains(SO_FAR))
        },
    )
    .await;
    let child = first_child().await.unwrap();
    let child_on: Vec<String> = c
        .fake
        .requests()
        .iter()
        .filter(|r| is_child(r))
        .filter_map(|r| r.header("x-node").map(str::to_string))
        .collect();
    assert_eq!(child_on, ["node-c"], "the child runs on node C");

    c.nodes[2].kill();
    let killed = Instant::now();

    // Once node C's lease lapses, a survivor records the child as interrupted and delivers
    // that into the root, whose turn on it ends with an answer.
    let a = &c.nodes[0];
    eventually_async(
        "the root to answer its child's interrupted result",
        || async {
            let messages = history(a, &root).await;
            deliveries(&messages)
                .first()
                .is_some_and(|(at, _)| answered_after(&messages, *at))
        },
    )
    .await;
    eprintln!(
        "node C killed: the root answered its child's interrupted result {:?} later",
        killed.elapsed()
    );
    let messages = history(a, &root).await;
    let results = deliveries(&messages);
    assert_eq!(results.len(), 1, "delivered once: {results:?}");
    let result = &results[0].1;
    assert!(
        result.starts_with(&format!(
            "<task_result session_id=\"{child}\" status=\"error\">"
        )),
        "{result}"
    );
    assert!(result.contains(SO_FAR), "its output so far: {result}");
    assert!(result.contains("interrupted"), "{result}");
    let readers: Vec<String> = c
        .fake
        .requests()
        .iter()
        .filter(|r| !is_child(r) && last_content(r).contains("<task_result "))
        .filter_map(|r| r.header("x-node").map(str::to_string))
        .collect();
    assert_eq!(readers.len(), 1, "one turn on the result: {readers:?}");
    assert_ne!(readers[0], "node-c", "the turn ran on a survivor");

    eventually_async("the record marked delivered", || delivered(&c, &child)).await;
    eventually_async("no call left running in the database", || async {
        unfinished_calls(&c.db).await == 0
    })
    .await;
    let messages = history(a, &root).await;
    assert_eq!(deliveries(&messages).len(), 1, "still delivered once");
    c.assert_no_panic();
}
