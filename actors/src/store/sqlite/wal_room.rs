//! Room in the write-ahead log's file: once the upsert thread has written a thousand rows,
//! whenever it has had nothing to write for a moment, it grows the log's file with zeros, a
//! step at a time, up to [`WAL_ROOM`], so that a burst of commits later writes over pages the
//! file already has instead of growing it page by page (a file that grows costs the kernel a
//! new cached page and a new block for every page written; a fan-out of a thousand children
//! writes some twenty megabytes of log).
//!
//! The zeros are never read as log: SQLite reads frames from the start of the file and stops
//! at the first whose salt and checksum do not follow, which zeros never do; and the file only
//! grows while this connection holds the write lock, so no writer of any process appends
//! frames meanwhile. Checkpoints here are passive and never shorten the file; SQLite removes
//! it when the last connection closes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

/// The size the log's file is grown to.
pub(super) const WAL_ROOM: u64 = 32 << 20;

/// How many rows the thread writes before the log is grown: a store that works hard gets the
/// room, a short command or a quiet store never pays for it.
pub(super) const WRITTEN_FIRST: usize = 1_000;

/// How much one step grows the file: a write waiting meanwhile waits for no more than that.
const STEP: u64 = 1 << 20;

/// How much of the step one write takes.
const CHUNK: usize = 64 << 10;

/// The log's file of one database and whether it still needs growing.
pub(super) struct WalRoom {
    path: PathBuf,
    /// Open once the file is first grown.
    file: Option<File>,
    /// The connection's lock wait, restored after each step.
    busy: Duration,
    /// The file is as large as it is grown to, or cannot be grown.
    done: bool,
    /// Rows written through the connection so far (counted up to [`WRITTEN_FIRST`]).
    written: usize,
}

impl WalRoom {
    /// The log beside the database file `db` (`<db>-wal`); `busy` is the connection's lock wait.
    pub fn new(db: &Path, busy: Duration) -> Self {
        let mut path = db.as_os_str().to_owned();
        path.push("-wal");
        WalRoom {
            path: PathBuf::from(path),
            file: None,
            busy,
            done: false,
            written: 0,
        }
    }

    /// Counts `rows` written through the connection.
    pub fn wrote(&mut self, rows: usize) {
        self.written = self.written.saturating_add(rows).min(WRITTEN_FIRST);
    }

    /// Whether the file is to be grown: it may still need it, and enough rows were written.
    pub fn wanted(&self) -> bool {
        !self.done && self.written >= WRITTEN_FIRST
    }

    /// Grows the file by one step when it is shorter than [`WAL_ROOM`]; answers whether it did
    /// (then there may be more to do). A step that cannot take the write lock at once is left
    /// for the next idle moment; any other failure ends the growing, logged: the log works
    /// the same without the room.
    pub fn grow(&mut self, conn: &Connection) -> bool {
        if self.done {
            return false;
        }
        match self.step(conn) {
            Ok(grown) => {
                self.done = !grown;
                grown
            }
            Err(Step::Busy) => false,
            Err(Step::Failed(e)) => {
                tracing::debug!(path = %self.path.display(), "the write-ahead log is not grown ahead: {e}");
                self.done = true;
                false
            }
        }
    }

    fn step(&mut self, conn: &Connection) -> Result<bool, Step> {
        // Without a log file SQLite has not opened one yet: it makes its own.
        let file = match &self.file {
            Some(file) => file,
            None => match std::fs::OpenOptions::new().write(true).open(&self.path) {
                Ok(file) => self.file.insert(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(Step::Failed(e.to_string())),
            },
        };
        conn.busy_timeout(Duration::ZERO).map_err(failed)?;
        let locked = Transaction::new_unchecked(conn, TransactionBehavior::Immediate);
        // The upserts must wait for the lock as before, whatever the step came to.
        conn.busy_timeout(self.busy).map_err(failed)?;
        let lock = match locked {
            Ok(lock) => lock,
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                return Err(Step::Busy);
            }
            Err(e) => return Err(failed(e)),
        };
        let len = file.metadata().map_err(failed)?.len();
        let grown = len < WAL_ROOM;
        if grown {
            // Made for the step (not kept in the program: a quiet store never needs it).
            let zeros = vec![0; CHUNK];
            let end = WAL_ROOM.min(len + STEP);
            let mut at = len;
            while at < end {
                let n = usize::try_from(end - at).map_or(CHUNK, |n| n.min(CHUNK));
                file.write_all_at(&zeros[..n], at).map_err(failed)?;
                at += n as u64;
            }
        }
        // Nothing was written through the connection: the lock goes with the rollback.
        lock.rollback().map_err(failed)?;
        Ok(grown)
    }
}

/// Why a step did not grow the file.
enum Step {
    /// Another connection holds the write lock.
    Busy,
    Failed(String),
}

fn failed(e: impl std::fmt::Display) -> Step {
    Step::Failed(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database with the store's schema, a connection of the upsert thread's kind on it and
    /// its log's room.
    /// (The migrations' connection is kept open with it, so that the log stays.)
    async fn database(dir: &Path) -> (PathBuf, Connection, WalRoom, sqlx::SqliteConnection) {
        let (path, migrated) = super::super::migrations::test_database(dir).await;
        let upserts = Connection::open(&path).unwrap();
        let room = WalRoom::new(&path, Duration::from_secs(1));
        (path, upserts, room, migrated)
    }

    #[tokio::test]
    async fn the_log_is_grown_to_its_room_a_step_at_a_time_and_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn, mut room, _migrated) = database(dir.path()).await;
        let wal = room.path.clone();
        let before = std::fs::metadata(&wal).unwrap().len();
        assert!(before < WAL_ROOM, "{before}");
        assert!(!room.wanted(), "not before a thousand rows");
        room.wrote(WRITTEN_FIRST - 1);
        assert!(!room.wanted());
        room.wrote(5);
        assert!(room.wanted());
        assert!(room.grow(&conn));
        let one = std::fs::metadata(&wal).unwrap().len();
        assert_eq!(one, before + STEP);
        let mut steps = 1;
        while room.grow(&conn) {
            steps += 1;
        }
        assert!(!room.wanted());
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), WAL_ROOM);
        assert!(steps >= 2 && steps <= (WAL_ROOM / STEP) as usize, "{steps}");
        assert!(!room.grow(&conn), "done once grown");
        // Writes go on over the zeros, and a new connection (which reads the log from its
        // start) sees every one of them.
        conn.execute_batch(
            "INSERT INTO session (id, project_id, title, title_folded, time_created, \
             time_updated, data) VALUES ('s1', 'p', 't', 't', 1, 1, '{}');",
        )
        .unwrap();
        let count = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM session", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(count(&Connection::open(&path).unwrap()), 1);
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), WAL_ROOM);
        // The files as a crash leaves them (no shared index beside them): opening them reads
        // the log's frames back from its start, and stops at the zeros.
        let copy = tempfile::tempdir().unwrap();
        let copied = copy.path().join("test.db");
        std::fs::copy(&path, &copied).unwrap();
        std::fs::copy(&wal, copy.path().join("test.db-wal")).unwrap();
        let recovered = Connection::open(&copied).unwrap();
        assert_eq!(count(&recovered), 1);
        let check: String = recovered
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    #[tokio::test]
    async fn a_log_locked_by_another_writer_is_grown_later() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn, mut room, _migrated) = database(dir.path()).await;
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let before = std::fs::metadata(&room.path).unwrap().len();
        assert!(!room.grow(&conn), "no step while another connection writes");
        assert_eq!(std::fs::metadata(&room.path).unwrap().len(), before);
        other.execute_batch("ROLLBACK").unwrap();
        assert!(room.grow(&conn), "grown once the lock is free");
    }

    #[test]
    fn a_database_without_a_log_is_left_to_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.db");
        let conn = Connection::open(&path).unwrap();
        let mut room = WalRoom::new(&path, Duration::from_secs(1));
        room.wrote(WRITTEN_FIRST);
        assert!(!room.grow(&conn));
        assert!(!room.wanted(), "left to SQLite for good");
        assert!(!room.path.exists());
    }
}
