//! What only the PostgreSQL store has: its address (a URL with a password that must not be
//! shown), a server that may not answer, and nodes opening a new database at once.

use taskforce_actors::store::{PostgresStore, SessionFilter, Store, StoreError};
use taskforce_testkit::postgres::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_opened_at_once_on_a_new_database_all_open() {
    for round in 0..3 {
        let Some(pg) =
            TestDatabase::create("stores_opened_at_once_on_a_new_database_all_open").await
        else {
            return;
        };
        let opens = futures::future::join_all((0..4).map(|_| PostgresStore::open(pg.url()))).await;
        for open in opens {
            let store = open.unwrap_or_else(|e| panic!("round {round}: {e}"));
            let listed = store.sessions(&SessionFilter::default()).await.unwrap();
            assert!(listed.is_empty());
            store.close().await;
        }
        let mut conn = pg.connect().await;
        let (applied,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(applied, 7, "each migration applied once");
    }
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_named_without_the_password() {
    // Port 1 on the loopback: nothing listens there.
    let err = PostgresStore::open("postgres://ann:s3cret@127.0.0.1:1/tf")
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(text.contains("postgres://ann@127.0.0.1:1/tf"), "{text}");
    assert!(text.contains("cannot connect"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test]
async fn a_url_that_is_not_postgresql_names_the_key() {
    for url in [
        "mysql://ann:s3cret@db/tf",
        "postgres://ann:s3cret@db/tf?sslmode=often",
    ] {
        let err = PostgresStore::open(url).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::Address { .. }), "{err:?}");
        assert!(text.contains("[store] url"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[tokio::test]
async fn the_schema_keeps_json_as_written_and_ids_in_byte_order() {
    let Some(pg) =
        TestDatabase::create("the_schema_keeps_json_as_written_and_ids_in_byte_order").await
    else {
        return;
    };
    let store = PostgresStore::open(pg.url()).await.unwrap();
    store.close().await;
    let mut conn = pg.connect().await;
    let (kind, collation): (String, Option<String>) = sqlx::query_as(
        "SELECT data_type, collation_name FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = 'part' AND column_name = $1",
    )
    .bind("data")
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(kind, "text");
    assert_eq!(collation, None);
    let (collation,): (Option<String>,) = sqlx::query_as(
        "SELECT collation_name FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = 'part' AND column_name = 'id'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(collation.as_deref(), Some("C"));
}
