//! [`SqliteStore`]: the embedded [`Store`](super::Store) — one SQLite file, WAL, one writer, a
//! few readers.
//!
//! Every row keeps its domain value as serde JSON in `data` (OpenCode's shapes survive as they
//! are); the other columns copy the fields that queries filter and order on.
//!
//! Writes: a writer task owns the one write connection, so writes are serialized in-process and
//! never fight over the SQLite write lock. Upserts of sessions, messages and parts queue up for
//! it, already encoded (the JSON of `data` is made once, by the caller), and it commits
//! whatever has queued up together (group commit) all or none: the sessions, then the messages,
//! then the parts, each table in multi-row upserts of a few fixed sizes whose values are bound
//! as they are, in one transaction (none when one statement does it). When that fails, the
//! rows are written one by one, in the same order, so that only the faulty ones report an
//! error. A caller that waits is answered after the commit, and since the queue is committed
//! in order, that also covers everything queued before. Writes queued without waiting are
//! read-your-writes: a read of their session waits for their commit. Other writes (deletes,
//! todo lists, permission approvals) run alone on the writer, in queue order. When nothing is
//! queued, an awaited write runs at once on the caller's task, on the same connection.
//!
//! Reads use a few dedicated `query_only` connections and, in WAL mode, never wait for the
//! writer; a message with its parts is read in one statement, so it is one snapshot.
//!
//! Where things are:
//! - `open.rs`: opening the file, the migrations, the connections and the background tasks;
//! - `store.rs`: the `Store` trait, each operation routed to a read, an upsert or an
//!   exclusive write;
//! - `reads.rs`: the read connections and the reads of sessions, messages and parts;
//! - `queue.rs`: handing writes to the writer (awaited, queued, exclusive, or direct);
//! - `unflushed.rs`: read-your-writes for writes queued without waiting;
//! - `jobs.rs`: what is queued; `writer.rs`: the writer task and its group commit;
//! - `upsert.rs`: a row to write; `statements.rs`: the multi-row upserts that write it;
//!   `commit.rs`: a batch written all or none, else row by row;
//! - `checkpoint.rs`: folding the write-ahead log back into the file;
//! - one file per other table or use: `deletes.rs`, `todos.rs`, `approvals.rs`,
//!   `background.rs`, `answers.rs`; `rows.rs`: decoding rows and mapping errors.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use sqlx::SqliteConnection;
use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::mpsc;

mod answers;
mod approvals;
mod background;
mod checkpoint;
mod commit;
mod deletes;
mod jobs;
mod migrations;
mod open;
mod queue;
mod reads;
mod rows;
mod statements;
mod store;
mod todos;
mod touch;
mod unflushed;
mod upsert;
mod writer;

use jobs::Job;
use reads::Readers;
use unflushed::Unflushed;

/// The [`Store`](super::Store) backed by the SQLite file `taskforce.db` in the data directory.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The database file.
    path: PathBuf,
    /// The read-only connections.
    readers: Arc<Readers>,
    /// Writes waiting for the writer task.
    queue: mpsc::UnboundedSender<Job>,
    /// The one write connection, shared by the writer task and the direct path.
    conn: Arc<AsyncMutex<SqliteConnection>>,
    /// Jobs queued and not yet done; while it is zero and the connection is free, a write runs
    /// at once on the caller's task instead of through the queue (two thread hops instead of
    /// four).
    pending: Arc<AtomicUsize>,
    /// Writes queued without waiting that reads must see (read-your-writes).
    unflushed: Arc<Unflushed>,
    /// The runtime writing through this store, once named: its unfinished answers carry its
    /// id (see `answers.rs`).
    runtime: Arc<OnceLock<Arc<str>>>,
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
        let _ = self.flush_queue().await;
    }
}
