//! What the cluster tests share: a node (a `taskforce serve --port 0 --cluster` process with a
//! `taskforce.toml` of its own), a cluster of such nodes on one database and one NATS prefix,
//! an HTTP client, and a recorder of a node's event stream.

use std::fs::File;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::nats::TestNats;
use taskforce_testkit::postgres::TestDatabase;

use crate::suite::support::{Sandbox, server_address};

/// How long a node's lease lasts: a killed node is taken for dead this long after its last
/// renewal.
pub const LEASE: &str = "2s";

/// A running node: its process, its address, its project.
pub struct Node {
    pub name: String,
    pub process: Child,
    pub base: String,
    sandbox: Sandbox,
}

impl Node {
    /// Starts `serve --cluster` as node `name` of the cluster, with models from `fake` (each
    /// request carrying the header `x-node: <name>`) and `extra` appended to its config.
    pub async fn start(
        name: &str,
        fake: &FakeOpenAi,
        nats: &TestNats,
        db: &TestDatabase,
        extra: &str,
    ) -> Node {
        let sandbox = Sandbox::new();
        let config = format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-test\"\n\n[provider.fake.headers]\nx-node = \"{name}\"\n\n[store]\nurl = \"{}\"\n{extra}{}",
            fake.base_url(),
            db.url(),
            nats.cluster_toml(name, LEASE),
        );
        sandbox.file("taskforce.toml", &config);
        let log = File::create(sandbox.project.join("serve.log")).unwrap();
        let mut process = sandbox
            .command(&["serve", "--port", "0", "--cluster"])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let base = server_address(&mut process)
            .await
            .unwrap_or_else(|| panic!("node {name} did not start"));
        Node {
            name: name.to_string(),
            process,
            base,
            sandbox,
        }
    }

    /// What the node wrote on stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.sandbox.project.join("serve.log")).unwrap_or_default()
    }

    /// Kills the process with SIGKILL (`kill -9`): no clean stop, its lease stays until it
    /// lapses.
    pub fn kill(&mut self) {
        self.process.kill().unwrap();
        self.process.wait().unwrap();
    }

    /// `GET {path}` on this node, as JSON.
    pub async fn get(&self, path: &str) -> Value {
        let url = format!("{}{path}", self.base);
        let response = client().get(&url).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "GET {url}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    /// Creates a root session on this node; answers its id.
    pub async fn new_session(&self) -> String {
        let session = post(&format!("{}/session", self.base), serde_json::json!({})).await;
        session["id"].as_str().unwrap().to_string()
    }

    /// Sends `text` to `session` through this node without waiting for the answer.
    pub async fn prompt_async(&self, session: &str, text: &str) {
        let url = format!("{}/session/{session}/prompt_async", self.base);
        let response = client()
            .post(&url)
            .json(&serde_json::json!({"parts": [{"type": "text", "text": text}]}))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "POST {url}: {}",
            response.status()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The nodes of one cluster, with their database and their fake model.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub db: TestDatabase,
    pub fake: FakeOpenAi,
    _nats: TestNats,
}

impl Cluster {
    /// Starts the nodes `names` (each with `extra` config) on a fresh database and NATS prefix,
    /// their models answering as `model` says; `None` (having said why) when the test has no
    /// PostgreSQL or no NATS to run against.
    pub async fn start(
        test: &str,
        names: &[&str],
        extra: &str,
        model: impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static,
    ) -> Option<Cluster> {
        let nats = TestNats::fresh(test)?;
        let db = TestDatabase::create(test).await?;
        let fake = FakeOpenAi::start(model).await.unwrap();
        let mut nodes = Vec::new();
        for name in names {
            nodes.push(Node::start(name, &fake, &nats, &db, extra).await);
        }
        Some(Cluster {
            nodes,
            db,
            fake,
            _nats: nats,
        })
    }

    /// Asserts that no node still running says it panicked.
    pub fn assert_no_panic(&self) {
        for node in &self.nodes {
            let log = node.log();
            assert!(!log.contains("panicked"), "{}: {log}", node.name);
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap()
}

pub async fn post(url: &str, body: Value) -> Value {
    let response = client().post(url).json(&body).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "POST {url}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// Every event an SSE client of `base` sees, as JSON, from now on.
pub async fn watch(base: &str) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let response = client().get(format!("{base}/event")).send().await.unwrap();
    assert!(response.status().is_success());
    let mut events = response.bytes_stream().eventsource();
    let keep = seen.clone();
    tokio::spawn(async move {
        while let Some(Ok(event)) = events.next().await {
            if let Ok(json) = serde_json::from_str::<Value>(&event.data) {
                keep.lock().unwrap().push(json);
            }
        }
    });
    seen
}

/// The events of type `kind` that `seen` holds whose properties `pick` accepts.
pub fn events_of(
    seen: &Mutex<Vec<Value>>,
    kind: &str,
    pick: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind && pick(&e["properties"]))
        .cloned()
        .collect()
}

/// Tool calls stored as pending or running, in any session.
pub async fn unfinished_calls(db: &TestDatabase) -> usize {
    let mut conn = db.connect().await;
    let rows: Vec<(String,)> = sqlx::query_as("SELECT data FROM part")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    rows.iter()
        .filter_map(|(data,)| serde_json::from_str::<Value>(data).ok())
        .filter(|p| p["type"] == "tool")
        .filter(|p| matches!(p["state"]["status"].as_str(), Some("pending" | "running")))
        .count()
}
