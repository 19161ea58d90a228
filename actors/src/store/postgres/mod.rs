//! [`PostgresStore`]: the [`Store`](super::Store) on a PostgreSQL server, for several runtimes
//! (nodes) sharing one database.
//!
//! It behaves as the SQLite store does: the same tables and columns (migrations of the same
//! versions in `actors/migrations/postgres`), every row's domain value as serde JSON text in
//! `data` (kept as written, so OpenCode's shapes come back byte for byte), an awaited write
//! committed before the call returns, writes queued without waiting committed in order by a
//! writer task with group commit, and reads of a session waiting for its queued writes
//! (read-your-writes). The writer task, its queue and read-your-writes are the SQLite store's
//! (`store/write`); what differs is how a batch is written: each table's rows in one
//! `INSERT … SELECT * FROM UNNEST(…) ON CONFLICT DO UPDATE` whose columns are bound as arrays,
//! in one transaction when it takes more than one statement; on failure, row by row.
//!
//! Connections come from a pool: reads take any, the writer one at a time. Several nodes write
//! the same database, so what must happen once happens in one statement that PostgreSQL makes
//! atomic: taking over a background record or an unfinished answer is an `UPDATE … WHERE
//! owner … RETURNING` that only one node's statement can match; moving a session's update time
//! is one `UPDATE` that never moves it back. Migrations run under sqlx's advisory lock, so nodes
//! starting at once on a new database apply them once.
//!
//! Where things are: `open.rs` (the address, the pool, the migrations), `store.rs` (the `Store`
//! trait), `commit.rs` (batches of upserts), `dialect.rs` (its text of the reads, deletes and
//! claims both stores share, `store/queries.rs`), `writes.rs` (todos, approvals, update
//! times), `trees.rs` (children counted per tree), `alive.rs` (which runtimes are alive: an
//! advisory lock each).

use sqlx::PgPool;

use super::write::WriteQueue;

mod alive;
mod commit;
mod dialect;
mod migrations;
mod open;
mod store;
mod trees;
mod writes;

/// The [`Store`](super::Store) on a PostgreSQL database, opened from a `postgres://` URL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    /// The server and database, without the password, for messages.
    address: String,
    /// The connections reads take.
    pool: PgPool,
    /// The writer task and the writes queued for it.
    writes: WriteQueue<Writer>,
    /// The lock that tells the other runtimes sharing the database that this one is alive.
    alive: alive::SharedAlive,
}

/// What the writer task writes through: the pool, one connection at a time.
#[derive(Debug)]
struct Writer(PgPool);

impl PostgresStore {
    /// The server and database in use, without the password (`postgres://user@host:5432/db`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Waits for the queued writes; the connections close when the last handle is dropped.
    pub async fn close(&self) {
        let _ = self.writes.flush().await;
    }
}
