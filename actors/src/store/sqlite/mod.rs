//! [`SqliteStore`]: the embedded [`Store`](super::Store) — one SQLite file, WAL, one writer, a
//! few readers.
//!
//! Every row keeps its domain value as serde JSON in `data` (OpenCode's shapes survive as they
//! are); the other columns copy the fields that queries filter and order on.
//!
//! Writes: a writer task owns the write connections, so writes are serialized in-process and
//! never fight over the SQLite write lock; the queue in front of it, its group commit and
//! read-your-writes are shared with the PostgreSQL store (see `store/write`). Here, a batch of
//! upserts is committed all or none by a thread with a connection of its own (rusqlite): the
//! sessions, then the messages, then the parts, then the sessions' touches (their update
//! times), with prepared one-row statements whose values are bound as they are, in one
//! transaction; the thread answers once per batch. The writer's other writes (deletes,
//! claims, edits) go through its sqlx connection. When nothing is
//! queued, an awaited write is handed to the thread at once by the caller's task.
//!
//! Reads use a few dedicated `query_only` connections and, in WAL mode, never wait for the
//! writer; a message with its parts is read in one statement, so it is one snapshot.
//!
//! Where things are:
//! - `open.rs`: opening the file, the migrations, the connections and the background tasks;
//! - `store.rs`: the `Store` trait, each operation routed to a read, an upsert or an
//!   exclusive write;
//! - `reads.rs`: the read connections; `dialect.rs`: SQLite's text of the reads, deletes and
//!   claims both stores share (`store/queries.rs`);
//! - `commit.rs`: the writer's two connections; `upserter.rs`: the thread that commits a batch
//!   of upserts all or none (and reads back the sessions a touch moved); `statements.rs`: the
//!   upsert of one row;
//! - `checkpoint.rs`: folding the write-ahead log back into the file; `wal_room.rs`: growing
//!   the log's file ahead of the writes, while the upsert thread is idle;
//! - the writes of SQLite's own shape: `todos.rs`, `approvals.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::write::WriteQueue;

mod approvals;
mod checkpoint;
mod commit;
mod dialect;
mod migrations;
mod open;
mod reads;
mod statements;
mod store;
mod todos;
mod upserter;
mod wal_room;

use commit::SqliteWriter;
use reads::Readers;

/// The [`Store`](super::Store) backed by the SQLite file `taskforce.db` in the data directory.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The database file.
    path: PathBuf,
    /// The read-only connections.
    readers: Arc<Readers>,
    /// The writer task and the writes queued for it.
    writes: WriteQueue<SqliteWriter>,
    /// The upsert thread, which also reads back the sessions a touch moved.
    upserts: upserter::Upserter,
}

impl SqliteStore {
    /// The name of the database file inside the data directory.
    pub const FILE_NAME: &'static str = "taskforce.db";

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the queued writes; the connections close when the last handle is dropped.
    pub async fn close(&self) {
        let _ = self.writes.flush().await;
    }
}
