//! A fresh PostgreSQL schema for each test, on the server `TASKFORCE_TEST_POSTGRES_URL` names:
//! tests running at once, and runs one after the other, never see each other's rows. Without
//! the variable, [`TestDatabase::create`] says on stderr that the test skips its PostgreSQL part
//! and answers `None`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

/// The variable naming the test server (`postgres://postgres@127.0.0.1:5432/test`).
pub const URL_VAR: &str = "TASKFORCE_TEST_POSTGRES_URL";

/// A schema of its own on the test server, dropped (with everything in it) when this is.
#[derive(Debug)]
pub struct TestDatabase {
    /// The server's URL as the variable gives it.
    server: String,
    /// The schema's name.
    schema: String,
    /// The server's URL with the schema as the connections' `search_path`.
    url: String,
}

impl TestDatabase {
    /// A new, empty schema on the test server; `None` (said on stderr, naming `test`) when
    /// `TASKFORCE_TEST_POSTGRES_URL` is not set. Panics when the server does not answer.
    pub async fn create(test: &str) -> Option<TestDatabase> {
        let Some(server) = std::env::var(URL_VAR).ok().filter(|v| !v.trim().is_empty()) else {
            eprintln!("{test}: the PostgreSQL part is skipped: {URL_VAR} is not set");
            return None;
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let schema = format!(
            "tf_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = PgConnection::connect(&server)
            .await
            .unwrap_or_else(|e| panic!("{URL_VAR}: cannot connect to {server}: {e}"));
        sqlx::query(&format!("CREATE SCHEMA \"{schema}\""))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot create schema {schema}: {e}"));
        let _ = conn.close().await;
        let separator = if server.contains('?') { '&' } else { '?' };
        let url = format!("{server}{separator}options=-c%20search_path%3D{schema}");
        Some(TestDatabase {
            server,
            schema,
            url,
        })
    }

    /// The URL of the schema: the server's, with the schema as `search_path`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema's name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A connection of its own to the schema, bypassing any store.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to schema {}: {e}", self.schema))
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (server, schema) = (self.server.clone(), self.schema.clone());
        // Its own thread and runtime: drop may run inside a runtime, or outside any.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&server)
                    .await
                    .map_err(|e| e.to_string())?;
                // A store of the test may still hold a lock for a moment; do not wait forever.
                sqlx::query("SET lock_timeout = '20s'")
                    .execute(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .execute(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
                let _ = conn.close().await;
                Ok::<(), String>(())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("cannot drop test schema {}: {e}", self.schema),
            Err(_) => eprintln!("cannot drop test schema {}", self.schema),
        }
    }
}
