//! Child runs placed on other nodes: runtimes sharing one PostgreSQL database
//! (`TASKFORCE_TEST_POSTGRES_URL`) and one NATS (`TASKFORCE_TEST_NATS_URL`). A node that is
//! full hands its task calls' children to the cluster; another node runs them; the calls get
//! their results as if the children had run at home.

use std::collections::BTreeSet;
use std::time::Duration;

use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::model::{PartKind, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::nats::TestNats;
use taskforce_testkit::postgres::TestDatabase;
use taskforce_testkit::script::{fan_out, first_user};

use super::runtime::Env;

/// How many children the root starts at once.
const CHILDREN: usize = 4;

/// The root starts `CHILDREN` children at once and then reports every answer it got; each
/// child answers after a moment (so that they overlap).
fn model() -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    fan_out(CHILDREN, |n| {
        Response::text(&format!("answer of child {n}")).after(Duration::from_millis(300))
    })
}

/// A node named `name`: at most one running child of its own, up to four per parent.
async fn node(fake: &FakeOpenAi, nats: &TestNats, db: &TestDatabase, name: &str) -> (Env, Runtime) {
    node_with(fake, nats, db, name, 100).await
}

/// [`node`] with `subagent.max_per_session = per_tree`.
async fn node_with(
    fake: &FakeOpenAi,
    nats: &TestNats,
    db: &TestDatabase,
    name: &str,
    per_tree: usize,
) -> (Env, Runtime) {
    let extra = format!(
        "{}\n[store]\nurl = \"{}\"\n\n[subagent]\nmax_total = 1\nmax_concurrent = 4\nmax_per_session = {per_tree}\n\n[provider.fake.headers]\nx-node = \"{name}\"\n",
        nats.cluster_toml(name, "10s"),
        db.url()
    );
    let env = Env::new(&fake.base_url(), &extra);
    let mut options = env.options();
    options.cluster = true;
    let rt = Runtime::start(options).await.unwrap();
    (env, rt)
}

#[actix_rt::test]
async fn a_full_node_places_children_on_another_and_gets_their_answers_as_if_they_ran_at_home() {
    let Some(nats) = TestNats::fresh("placement") else {
        return;
    };
    let Some(db) = TestDatabase::create("placement").await else {
        return;
    };
    let fake = FakeOpenAi::start(model()).await.unwrap();
    let (_a_env, a) = node(&fake, &nats, &db, "node-a").await;
    let (_b_env, b) = node(&fake, &nats, &db, "node-b").await;
    let root = a.create_session(None, None).await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(60),
        a.prompt(&root.id, PromptInput::text("fan out")),
    )
    .await
    .expect("the root answered")
    .unwrap();
    assert!(format!("{:?}", answer.parts).contains("root heard every child"));

    // Every call completed with its own child's answer and the child's session.
    let history = a.messages(&root.id).await.unwrap();
    let mut answered = BTreeSet::new();
    for part in history.iter().flat_map(|m| m.parts.iter()) {
        let PartKind::Tool(tool) = &part.kind else {
            continue;
        };
        let ToolState::Completed(done) = &tool.state else {
            panic!("a task call did not complete: {:?}", tool.state);
        };
        let n = (0..CHILDREN)
            .find(|n| done.output.contains(&format!("answer of child {n}")))
            .unwrap_or_else(|| panic!("no child's answer in {}", done.output));
        assert!(
            done.metadata.get("sessionId").is_some(),
            "{:?}",
            done.metadata
        );
        answered.insert(n);
    }
    assert_eq!(
        answered.len(),
        CHILDREN,
        "each call got its own child's answer"
    );
    assert_eq!(a.children(&root.id).await.unwrap().len(), CHILDREN);

    // Both nodes ran children: A had room for one at a time, B took the rest.
    let nodes: BTreeSet<String> = fake
        .requests()
        .iter()
        .filter(|r| first_user(r).starts_with("child "))
        .filter_map(|r| r.header("x-node").map(str::to_string))
        .collect();
    assert_eq!(
        nodes,
        BTreeSet::from(["node-a".to_string(), "node-b".to_string()]),
        "children ran on both nodes"
    );
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn a_trees_limit_of_children_is_counted_in_the_store_the_nodes_share() {
    let Some(nats) = TestNats::fresh("tree_limit") else {
        return;
    };
    let Some(db) = TestDatabase::create("tree_limit").await else {
        return;
    };
    let fake = FakeOpenAi::start(model()).await.unwrap();
    let (_a_env, a) = node_with(&fake, &nats, &db, "node-a", 3).await;
    let (_b_env, b) = node_with(&fake, &nats, &db, "node-b", 3).await;
    let root = a.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        a.prompt(&root.id, PromptInput::text("fan out")),
    )
    .await
    .expect("the root answered")
    .unwrap();
    let mut completed = 0;
    let mut refused = 0;
    for part in a
        .messages(&root.id)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.parts.clone())
    {
        let PartKind::Tool(tool) = &part.kind else {
            continue;
        };
        match &tool.state {
            ToolState::Completed(_) => completed += 1,
            ToolState::Error(e) if e.error.contains("SUBAGENT_LIMIT_REACHED") => refused += 1,
            other => panic!("unexpected end of a task call: {other:?}"),
        }
    }
    assert_eq!((completed, refused), (3, CHILDREN - 3));
    let mut conn = db.connect().await;
    let (created,): (i64,) = sqlx::query_as("SELECT created FROM tree_count WHERE root = $1")
        .bind(root.id.as_str())
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(created, 3, "the count every node reads");
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}
