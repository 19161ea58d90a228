//! A node killed while its sessions wait for the user: a question and a permission ask it held,
//! listed by another node, are closed for that node's clients and leave its lists once the
//! killed node's lease lapses.

use std::time::Instant;

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};
use taskforce_testkit::script::{bash, first_user, last_content};
use taskforce_testkit::{eventually, eventually_async};

use super::support::{Cluster, Node, events_of, unfinished_calls, watch};

/// A root told "ask me" asks which color; one told "run it" runs a command that needs the
/// user's leave; either reports what it heard afterwards.
fn asking(req: &RecordedRequest) -> Response {
    if req.last_role() != Some("user") {
        return Response::text(&format!("heard: {}", last_content(req)));
    }
    if first_user(req) == "run it" {
        return bash("echo allowed");
    }
    let questions = json!({"questions": [{
        "question": "Which color?", "header": "Color",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]
    }]});
    Response::tool_calls(&[("call_q", "question", &questions.to_string())])
}

/// The ids of the asks `GET {path}` on `node` lists for `session`.
async fn listed(node: &Node, path: &str, session: &str) -> Vec<String> {
    node.get(path)
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|ask| ask["sessionID"] == session)
        .filter_map(|ask| ask["id"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_asks_of_a_killed_node_are_closed_for_another_nodes_clients_and_leave_its_lists() {
    let Some(mut c) = Cluster::start(
        "nodes_dead_asks",
        &["node-a", "node-b", "node-c"],
        "\n[permission]\nbash = \"ask\"\n",
        asking,
    )
    .await
    else {
        return;
    };
    let seen_on_a = watch(&c.nodes[0].base).await;
    // Two roots on node C: one asks a question, the other asks leave to run a command.
    let (asker, runner) = (
        c.nodes[2].new_session().await,
        c.nodes[2].new_session().await,
    );
    c.nodes[2].prompt_async(&asker, "ask me").await;
    c.nodes[2].prompt_async(&runner, "run it").await;

    // Node A lists both asks, though node C holds them.
    let a = &c.nodes[0];
    eventually_async(
        "node A to list node C's question and permission ask",
        || async {
            listed(a, "/question", &asker).await.len() == 1
                && listed(a, "/permission", &runner).await.len() == 1
        },
    )
    .await;
    let question = listed(a, "/question", &asker).await.remove(0);
    let permission = listed(a, "/permission", &runner).await.remove(0);

    c.nodes[2].kill();
    let killed = Instant::now();

    // Once node C's lease lapses, a survivor closes its asks for every client: node A's stream
    // shows the question dismissed and the permission ask rejected.
    let rejected = |e: &Value| e["requestID"] == question.as_str() && e["sessionID"] == asker;
    let refused = |e: &Value| {
        e["requestID"] == permission.as_str() && e["sessionID"] == runner && e["reply"] == "reject"
    };
    eventually("node A's stream to close node C's asks", || {
        !events_of(&seen_on_a, "question.rejected", rejected).is_empty()
            && !events_of(&seen_on_a, "permission.replied", refused).is_empty()
    })
    .await;
    eprintln!(
        "node C killed: node A's stream closed its asks {:?} later",
        killed.elapsed()
    );
    let a = &c.nodes[0];
    assert!(
        listed(a, "/question", &asker).await.is_empty(),
        "node A no longer lists the question"
    );
    assert!(
        listed(a, "/permission", &runner).await.is_empty(),
        "node A no longer lists the permission ask"
    );
    // The survivors also ended the calls that waited for those answers.
    eventually_async("no call left running in the database", || async {
        unfinished_calls(&c.db).await == 0
    })
    .await;
    c.assert_no_panic();
}
