//! Opening the store: the database file and its connections (one to write, a few to read, one
//! to checkpoint), the schema migrations under a lock shared with other processes, and the
//! writer and checkpoint tasks.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use tokio::sync::Mutex as AsyncMutex;

use crate::store::StoreError;
use crate::store::write::WriteQueue;

use super::SqliteStore;
use super::checkpoint::checkpoint;
use super::commit::SqliteWriter;
use super::reads::Readers;
use super::upserter::Upserter;

/// The file beside the database that one process at a time locks to apply the migrations.
const MIGRATION_LOCK: &str = "taskforce.db.migrate-lock";

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many read connections the store keeps at most.
const READERS: usize = 4;

impl SqliteStore {
    /// Opens (creating if needed) `<data_dir>/taskforce.db` and brings its schema up to date.
    pub async fn open(data_dir: &Path) -> Result<SqliteStore, StoreError> {
        let path = data_dir.join(Self::FILE_NAME);
        let open_error = |message: String| StoreError::Open {
            path: path.display().to_string(),
            message,
        };
        tokio::fs::create_dir_all(data_dir).await.map_err(|e| {
            open_error(format!(
                "cannot create the data directory {}: {e}",
                data_dir.display()
            ))
        })?;

        let base = SqliteConnectOptions::new()
            .filename(&path)
            .foreign_keys(true)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT);

        let writer_options = base
            .clone()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // Checkpoints (which fsync) run in the background, not inside a write.
            .pragma("wal_autocheckpoint", "0")
            // Statement journals (the undo of one upsert inside a batch's transaction) stay in
            // memory instead of spilling to a temporary file.
            .pragma("temp_store", "MEMORY")
            .optimize_on_close(true, None);
        // Two processes opening a new database at once must not both create its tables, nor
        // switch it to WAL at the same moment (that answers "database is locked" at once, with
        // no busy wait): the first connection and the migrations run under an exclusive lock on
        // a file beside the database.
        let lock_path = data_dir.join(MIGRATION_LOCK);
        let migrating = tokio::task::spawn_blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)?;
            file.lock()?;
            Ok::<_, std::io::Error>(file)
        })
        .await
        .map_err(|e| open_error(format!("cannot lock the database for its migrations: {e}")))?
        .map_err(|e| open_error(format!("cannot lock the database for its migrations: {e}")))?;
        let mut writer = writer_options
            .connect()
            .await
            .map_err(|e| open_error(format!("cannot open the database: {e}")))?;
        super::migrations::migrator()
            .await
            .map_err(|e| open_error(format!("cannot read the migrations: {e}")))?
            .run(&mut writer)
            .await
            .map_err(|e| open_error(format!("cannot apply the migrations: {e}")))?;
        drop(migrating);

        let read_options = base.clone().pragma("query_only", "ON");
        let mut conns = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let conn = read_options
                .connect()
                .await
                .map_err(|e| open_error(format!("cannot open read connections: {e}")))?;
            conns.push(AsyncMutex::new(conn));
        }

        let upserts = Upserter::open(&path, BUSY_TIMEOUT)
            .await
            .map_err(|e| open_error(format!("cannot open the upsert connection: {e}")))?;
        tracing::debug!(path = %path.display(), "opened the store");
        let writes = WriteQueue::start(SqliteWriter::new(writer, upserts.clone()));
        let checkpointer = base
            .connect()
            .await
            .map_err(|e| open_error(format!("cannot open the checkpoint connection: {e}")))?;
        tokio::spawn(checkpoint(checkpointer, writes.downgrade()));
        Ok(SqliteStore {
            path,
            readers: Arc::new(Readers::new(conns)),
            writes,
            upserts,
        })
    }
}
