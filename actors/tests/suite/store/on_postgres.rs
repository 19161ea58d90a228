//! What only the PostgreSQL store has: its address (a URL with a password that must not be
//! shown), a server that may not answer, nodes opening a new database at once, and the lock
//! that tells other runtimes this one is alive, taken again after a cut.

use taskforce_actors::store::{PostgresStore, SessionFilter, Store, StoreError, TreeCount};
use taskforce_agents::id::SessionId;
use taskforce_testkit::postgres::TestDatabase;
use taskforce_testkit::proxy::CutProxy;
use taskforce_testkit::{eventually, eventually_async};

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
        let migrations =
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
                .unwrap()
                .count();
        assert_eq!(
            usize::try_from(applied).unwrap(),
            migrations,
            "each migration applied once"
        );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_cut_off_from_the_server_takes_its_lock_again_and_says_so() {
    let Some(pg) =
        TestDatabase::create("a_runtime_cut_off_from_the_server_takes_its_lock_again").await
    else {
        return;
    };
    // The server's host and port, and the same URL through a proxy the test can cut.
    let url = pg.url().to_string();
    let after_at = url.split_once('@').map_or(url.as_str(), |(_, rest)| rest);
    let server = after_at.split(['/', '?']).next().unwrap().to_string();
    let proxy = CutProxy::start(&server).await;
    let port = proxy.url.rsplit(':').next().unwrap().to_string();
    let through = url.replacen(&server, &format!("127.0.0.1:{port}"), 1);
    let store = PostgresStore::open(&through).await.unwrap();
    let watcher = PostgresStore::open(pg.url()).await.unwrap();
    assert_eq!(store.link(), None, "no lock held yet");
    store.hold_alive("rt_cut").await.unwrap();
    assert_eq!(store.link().as_deref(), Some("connected"));
    assert_eq!(watcher.is_alive("rt_cut").await, Some(true));

    proxy.cut();
    eventually("the store to notice the cut", || {
        store.link().is_some_and(|l| l.starts_with("disconnected"))
    })
    .await;
    // Its connection gone, its lock is free: another runtime would take it for dead now.
    eventually_async("the lock to be free", || async {
        watcher.is_alive("rt_cut").await == Some(false)
    })
    .await;

    proxy.restore();
    eventually("the store to be back, saying it was cut once", || {
        store
            .link()
            .is_some_and(|l| l.starts_with("connected; lost 1 time(s)"))
    })
    .await;
    assert_eq!(
        watcher.is_alive("rt_cut").await,
        Some(true),
        "the lock is held again"
    );
    store.close().await;
    watcher.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_counting_one_trees_children_at_once_never_pass_its_limit() {
    let Some(pg) = TestDatabase::create("nodes_counting_one_trees_children_at_once").await else {
        return;
    };
    let (a, b) = (
        PostgresStore::open(pg.url()).await.unwrap(),
        PostgresStore::open(pg.url()).await.unwrap(),
    );
    let root = SessionId::new();
    assert_eq!(
        a.count_tree_child(&root, None, 5).await.unwrap(),
        TreeCount::Unseeded,
        "a tree with no count asks for its stored descendants"
    );
    // Started with the two children it already has.
    assert_eq!(
        a.count_tree_child(&root, Some(2), 5).await.unwrap(),
        TreeCount::Counted
    );
    let counts = futures::future::join_all((0..20).map(|i| {
        let (store, root) = (if i % 2 == 0 { &a } else { &b }, &root);
        async move { store.count_tree_child(root, Some(2), 5).await.unwrap() }
    }))
    .await;
    let counted = counts.iter().filter(|c| **c == TreeCount::Counted).count();
    assert_eq!(counted, 2, "3 + 2 = the limit of 5: {counts:?}");
    assert!(counts.contains(&TreeCount::Full { created: 5 }));
    b.uncount_tree_child(&root).await.unwrap();
    assert_eq!(
        b.count_tree_child(&root, None, 5).await.unwrap(),
        TreeCount::Counted,
        "a child taken back frees its place"
    );
    // SQLite keeps no count: its runtime counts in memory.
    let dir = tempfile::tempdir().unwrap();
    let sqlite = taskforce_actors::store::SqliteStore::open(dir.path())
        .await
        .unwrap();
    assert_eq!(
        sqlite.count_tree_child(&root, None, 5).await.unwrap(),
        TreeCount::NotKept
    );
}
