//! A runtime configured with `[store] url` keeps its sessions in PostgreSQL: a delegation's
//! rows land there, and another runtime on the same database reads them back.

use std::time::Duration;

use taskforce_actors::PromptInput;
use taskforce_actors::store::SessionFilter;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::postgres::TestDatabase;
use taskforce_testkit::script::{is_child, task_call};

use crate::suite::runtime::Env;

const GENERAL: &str =
    r#"{"description":"Look around","prompt":"Find the answer","subagent_type":"general"}"#;

#[actix_rt::test]
async fn a_runtime_on_postgresql_stores_a_delegation_there_for_the_next_runtime() {
    let Some(pg) = TestDatabase::create(
        "a_runtime_on_postgresql_stores_a_delegation_there_for_the_next_runtime",
    )
    .await
    else {
        return;
    };
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_child(req) {
            Response::text("The answer is 42.")
        } else if req.last_role() == Some("user") {
            task_call(GENERAL)
        } else {
            Response::text("Done.")
        }
    })
    .await
    .unwrap();
    let env = Env::new(
        &fake.base_url(),
        &format!("\n[store]\nurl = \"{}\"\n", pg.url()),
    );
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&parent.id, PromptInput::text("go")),
    )
    .await
    .expect("the prompt never waits forever")
    .unwrap();
    assert_eq!(
        answer
            .parts
            .iter()
            .filter(|p| p.as_text().is_some())
            .count(),
        1
    );
    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(children.len(), 1);
    let parent_messages = rt.messages(&parent.id).await.unwrap();
    let child_messages = rt.messages(&children[0].id).await.unwrap();
    rt.shutdown().await;

    // The rows are in PostgreSQL, and no SQLite file was made.
    let mut conn = pg.connect().await;
    for (table, at_least) in [("session", 2), ("message", 4), ("part", 4)] {
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(n >= at_least, "{table}: {n} rows");
    }
    let (text,): (String,) = sqlx::query_as(
        "SELECT data FROM part WHERE session_id = $1 AND data LIKE '%The answer is 42.%' LIMIT 1",
    )
    .bind(children[0].id.as_str())
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(text.contains("\"type\":\"text\""), "{text}");
    assert!(!env.data().join("taskforce.db").exists());

    // A second runtime on the same database reads them back as they were.
    let again = env.runtime().await;
    let sessions = again.sessions(&SessionFilter::default()).await.unwrap();
    assert!(sessions.iter().any(|s| s.id == parent.id), "{sessions:?}");
    assert_eq!(again.children(&parent.id).await.unwrap(), children);
    assert_eq!(again.messages(&parent.id).await.unwrap(), parent_messages);
    assert_eq!(
        again.messages(&children[0].id).await.unwrap(),
        child_messages
    );
    again.shutdown().await;
}
