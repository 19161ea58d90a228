//! What only the SQLite store has: its file and write-ahead log in the data directory, the lock
//! that lets processes open a new directory at once, and the upgrade of a database written
//! through the JSON batch trigger of earlier versions.

use serde_json::json;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use taskforce_actors::store::{SessionFilter, SqliteStore, Store, StoreError};

use super::{ids, root, text, user};

/// A direct connection to the store's database file, bypassing the store.
async fn raw(store: &SqliteStore) -> SqliteConnection {
    let options = SqliteConnectOptions::new().filename(store.path());
    SqliteConnection::connect_with(&options).await.unwrap()
}

/// How many rows `table` holds.
async fn count(store: &SqliteStore, table: &str) -> i64 {
    let mut conn = raw(store).await;
    let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(&mut conn)
        .await
        .unwrap();
    n
}

#[tokio::test]
async fn open_creates_the_directory_and_a_wal_database() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested").join("data");
    let store = SqliteStore::open(&data).await.unwrap();
    assert_eq!(store.path(), data.join("taskforce.db"));
    assert!(store.path().is_file());
    let mut conn = raw(&store).await;
    let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    for table in ["session", "message", "part", "todo"] {
        assert_eq!(count(&store, table).await, 0, "{table}");
    }
    // The JSON batch table of migration 0002 is gone (0005).
    let (batch_objects,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'write_batch%'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(batch_objects, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_opened_at_once_on_a_new_directory_all_open() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let opens = futures::future::join_all((0..4).map(|_| SqliteStore::open(&data))).await;
        for open in opens {
            let store = open.unwrap();
            assert_eq!(count(&store, "session").await, 0);
            store.close().await;
        }
    }
}

#[tokio::test]
async fn open_reports_an_unusable_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, "x").unwrap();
    let err = SqliteStore::open(&file.join("data")).await.unwrap_err();
    match &err {
        StoreError::Open { path, message } => {
            assert!(path.ends_with("taskforce.db"), "{path}");
            assert!(message.contains("directory"), "{message}");
        }
        other => panic!("expected Open, got {other:?}"),
    }
}

#[tokio::test]
async fn a_database_written_through_the_json_batch_trigger_upgrades() {
    // The schema as it was before migration 0005, with a session written the old way.
    let data = tempfile::tempdir().unwrap();
    let old = tempfile::tempdir().unwrap();
    let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().as_ref() < "0005" {
            std::fs::copy(entry.path(), old.path().join(entry.file_name())).unwrap();
        }
    }
    let session = root("Written Before", 1_000);
    {
        let options = SqliteConnectOptions::new()
            .filename(data.path().join(SqliteStore::FILE_NAME))
            .create_if_missing(true)
            .foreign_keys(true);
        let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
        let migrator = sqlx::migrate::Migrator::new(old.path()).await.unwrap();
        migrator.run(&mut conn).await.unwrap();
        let row = json!([
            session.id.as_str(),
            null,
            session.project_id,
            session.title,
            session.title.to_lowercase(),
            1_000,
            1_000,
            serde_json::to_string(&session).unwrap()
        ]);
        sqlx::query("INSERT INTO write_batch (payload) VALUES (?1)")
            .bind(json!({"s": [row], "m": [], "p": []}).to_string())
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }

    let store = SqliteStore::open(data.path()).await.unwrap();
    assert_eq!(
        store.session(&session.id).await.unwrap(),
        Some(session.clone())
    );
    let u = user(&session, 1_001);
    store.put_message(&u.clone().into()).await.unwrap();
    store
        .put_part(&text(&session, &u.id, "after"))
        .await
        .unwrap();
    assert_eq!(store.messages(&session.id).await.unwrap()[0].parts.len(), 1);
    let filter = SessionFilter {
        search: Some("written BEFORE".into()),
        ..SessionFilter::default()
    };
    assert_eq!(
        ids(&store.sessions(&filter).await.unwrap()),
        vec![session.id.clone()]
    );
    assert_eq!(count(&store, "session").await, 1);
}
