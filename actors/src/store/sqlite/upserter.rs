//! The thread that writes the store's upserts, through a connection of its own: a batch is one
//! transaction of prepared one-row statements, run without leaving the thread. (An async
//! driver makes a round trip between threads for every statement, its begin and its commit;
//! here a batch makes one.) Other writes keep to the writer's sqlx connection. The sessions a
//! touch has just moved are read back here too, from pages the thread has just written.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use crate::store::queries::Conn;
use crate::store::rows::TextRow;
use crate::store::write::{Table, Upsert};

use super::statements::Statements;
use super::wal_room::WalRoom;

/// What the thread is asked, and who hears how it went.
enum Request {
    /// Rows to write: one alone; more, all or none in one transaction.
    Write {
        rows: Vec<Arc<Upsert>>,
        done: oneshot::Sender<Result<(), String>>,
    },
    /// The stored rows of the sessions whose ids are in this JSON array.
    Sessions {
        ids: String,
        done: oneshot::Sender<Result<Vec<SessionRow>, String>>,
    },
}

/// A session's row as read back: its id, its payload and its update time.
#[derive(Debug)]
pub(super) struct SessionRow {
    id: String,
    data: String,
    time_updated: i64,
}

impl TextRow for SessionRow {
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        match column {
            "id" => Ok(self.id.clone()),
            "data" => Ok(self.data.clone()),
            other => Err(sqlx::Error::ColumnNotFound(other.into())),
        }
    }
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        match column {
            "time_updated" => Ok(self.time_updated),
            other => Err(sqlx::Error::ColumnNotFound(other.into())),
        }
    }
}

/// The handle of the upsert thread; the thread and its connection end with the last handle.
#[derive(Debug, Clone)]
pub(crate) struct Upserter {
    requests: std_mpsc::Sender<Request>,
}

/// The error of a request the thread did not answer.
const GONE: &str = "the upsert thread stopped";

impl Upserter {
    /// Opens the database file at `path` (its schema is in place) on a new thread.
    pub(super) async fn open(path: &Path, busy: Duration) -> Result<Upserter, String> {
        let path = path.to_path_buf();
        let (requests, incoming) = std_mpsc::channel();
        let (opened, open) = oneshot::channel();
        std::thread::Builder::new()
            .name("taskforce-sqlite-upserts".into())
            .spawn(move || match connect(&path, busy) {
                Ok(conn) => {
                    let _ = opened.send(Ok(()));
                    serve(conn, &incoming, WalRoom::new(&path, busy));
                }
                Err(e) => {
                    let _ = opened.send(Err(e.to_string()));
                }
            })
            .map_err(|e| format!("cannot start the upsert thread: {e}"))?;
        open.await.map_err(|_| GONE.to_string())??;
        Ok(Upserter { requests })
    }

    /// Writes `rows` all or none, in one transaction (parents first: sessions, then
    /// messages, then parts, each in order, so that a later upsert of a row wins).
    pub(super) async fn write_all(&self, rows: Vec<Arc<Upsert>>) -> Result<(), String> {
        self.request(rows).await
    }

    /// Writes one row alone.
    pub(super) async fn write_one(&self, row: Arc<Upsert>) -> Result<(), String> {
        self.request(vec![row]).await
    }

    /// The stored rows of the sessions `ids` (those that exist), read after every write
    /// requested before.
    pub(super) async fn sessions(&self, ids: &[String]) -> Result<Vec<SessionRow>, String> {
        let ids = serde_json::to_string(ids).map_err(|e| e.to_string())?;
        let (done, answer) = oneshot::channel();
        self.requests
            .send(Request::Sessions { ids, done })
            .map_err(|_| GONE.to_string())?;
        answer.await.unwrap_or_else(|_| Err(GONE.to_string()))
    }

    async fn request(&self, rows: Vec<Arc<Upsert>>) -> Result<(), String> {
        let (done, answer) = oneshot::channel();
        self.requests
            .send(Request::Write { rows, done })
            .map_err(|_| GONE.to_string())?;
        answer.await.unwrap_or_else(|_| Err(GONE.to_string()))
    }
}

/// The upsert connection: foreign keys checked, the write-ahead log left to the background
/// checkpoints, statement journals in memory, and the writer's lock wait.
fn connect(path: &Path, busy: Duration) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy)?;
    conn.execute_batch(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; \
         PRAGMA wal_autocheckpoint = 0; PRAGMA temp_store = MEMORY;",
    )?;
    Ok(conn)
}

/// How long the thread has had nothing to do before it grows the write-ahead log's file: a
/// burst of writes (and the work around it) is not slowed by the growing.
const QUIET: Duration = Duration::from_millis(20);

/// What the thread takes up next.
enum Next {
    Request(Request),
    /// Nothing came: time to grow the log.
    Idle,
    /// Every handle is dropped.
    Closed,
}

/// The next request; `Idle` instead when the log is `wanted` grown and none came for
/// [`QUIET`] (at once when it is `quiet` already).
fn next(requests: &std_mpsc::Receiver<Request>, wanted: bool, quiet: bool) -> Next {
    use std_mpsc::{RecvTimeoutError, TryRecvError};
    match (wanted, quiet) {
        (false, _) => requests.recv().map_or(Next::Closed, Next::Request),
        (true, true) => match requests.try_recv() {
            Ok(request) => Next::Request(request),
            Err(TryRecvError::Empty) => Next::Idle,
            Err(TryRecvError::Disconnected) => Next::Closed,
        },
        (true, false) => match requests.recv_timeout(QUIET) {
            Ok(request) => Next::Request(request),
            Err(RecvTimeoutError::Timeout) => Next::Idle,
            Err(RecvTimeoutError::Disconnected) => Next::Closed,
        },
    }
}

/// Answers requests in order until every handle is dropped; once a thousand rows were written
/// and then none came for [`QUIET`], grows the write-ahead log's file ahead of the writes, a
/// step at a time while none comes (see `wal_room.rs`).
fn serve(conn: Connection, requests: &std_mpsc::Receiver<Request>, mut room: WalRoom) {
    let mut statements = Statements::new(&conn);
    // Nothing came for `QUIET`, nor since.
    let mut quiet = false;
    loop {
        let request = match next(requests, room.wanted(), quiet) {
            Next::Request(request) => {
                quiet = false;
                request
            }
            Next::Idle => {
                // A step that grew the file is followed by the next while nothing comes; one
                // that could not (another writer holds the lock) waits for quiet again.
                quiet = room.grow(&conn);
                continue;
            }
            Next::Closed => break,
        };
        match request {
            Request::Write { rows, done } => {
                room.wrote(rows.len());
                let result = match rows.as_slice() {
                    [] => Ok(()),
                    [row] => statements.write_row(row),
                    _ => write_together(&mut statements, &rows),
                };
                let _ = done.send(result.map_err(|e| e.to_string()));
            }
            Request::Sessions { ids, done } => {
                let _ = done.send(sessions_in(&conn, &ids).map_err(|e| e.to_string()));
            }
        }
    }
}

/// The rows of the sessions whose ids are in the JSON array `ids`.
fn sessions_in(conn: &Connection, ids: &str) -> rusqlite::Result<Vec<SessionRow>> {
    // The reads' own statement, bound the same way (a JSON array of ids).
    let mut statement = conn.prepare_cached(<sqlx::SqliteConnection as Conn>::SQL.sessions_in)?;
    let rows = statement.query_map([ids], |row| {
        Ok(SessionRow {
            id: row.get(0)?,
            data: row.get(1)?,
            time_updated: row.get(2)?,
        })
    })?;
    rows.collect()
}

/// Writes `rows` in one transaction, table by table; nothing is kept if one fails.
fn write_together(statements: &mut Statements<'_>, rows: &[Arc<Upsert>]) -> rusqlite::Result<()> {
    // Taking the write lock at once: a transaction that starts by reading could not take it
    // later if another process wrote meanwhile. (The statements borrow the connection, so the
    // transaction does too; none is ever open when a batch begins.)
    let tx = Transaction::new_unchecked(statements.conn(), TransactionBehavior::Immediate)?;
    for table in Table::ALL {
        for row in rows.iter().filter(|r| r.table() == table) {
            statements.write_row(row)?;
        }
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use taskforce_agents::id::MessageId;
    use taskforce_agents::model::{Message, ModelRef, Part, Session, TextPart, UserMessage};

    use super::*;

    /// A database file with the store's schema, an upserter on it and a connection to read it.
    async fn upserter() -> (tempfile::TempDir, Upserter, sqlx::SqliteConnection) {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = super::super::migrations::test_database(dir.path()).await;
        let upserts = Upserter::open(&path, Duration::from_secs(1)).await.unwrap();
        (dir, upserts, conn)
    }

    async fn count(conn: &mut sqlx::SqliteConnection, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(conn)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_batch_with_a_faulty_row_keeps_none_of_its_rows() {
        let (_dir, upserts, mut conn) = upserter().await;
        let session = Session::new("proj", "/srv/p", "one", 1_000);
        let user: Message = UserMessage::new(
            session.id.clone(),
            "build",
            ModelRef::new("scripted", "echo"),
            1_001,
        )
        .into();
        let text = |message: &str| {
            Part::new(
                session.id.clone(),
                MessageId::from_str(message).unwrap(),
                TextPart::new("hi"),
            )
        };
        let good = vec![
            Arc::new(Upsert::of_session(&session).unwrap()),
            Arc::new(Upsert::of_message(&user, None).unwrap()),
            Arc::new(Upsert::of_part(&text(user.id().as_str())).unwrap()),
        ];
        // A part of a message that does not exist breaks the foreign key.
        let mut faulty = good.clone();
        faulty.push(Arc::new(
            Upsert::of_part(&text(MessageId::new().as_str())).unwrap(),
        ));

        let error = upserts.write_all(faulty).await.unwrap_err();
        assert!(error.contains("FOREIGN KEY"), "{error}");
        for table in ["session", "message", "part"] {
            assert_eq!(count(&mut conn, table).await, 0, "{table}");
        }

        upserts.write_all(good).await.unwrap();
        for table in ["session", "message", "part"] {
            assert_eq!(count(&mut conn, table).await, 1, "{table}");
        }
        // A row alone is written by itself.
        let other = Session::new("proj", "/srv/p", "two", 2_000);
        upserts
            .write_one(Arc::new(Upsert::of_session(&other).unwrap()))
            .await
            .unwrap();
        assert_eq!(count(&mut conn, "session").await, 2);
    }

    #[tokio::test]
    async fn a_batch_of_many_parts_keeps_each_parts_last_state_and_moves_a_part_that_moved() {
        let (_dir, upserts, mut conn) = upserter().await;
        let session = Session::new("proj", "/srv/p", "one", 1_000);
        let message = |at| -> Message {
            UserMessage::new(
                session.id.clone(),
                "build",
                ModelRef::new("scripted", "echo"),
                at,
            )
            .into()
        };
        let (first, second) = (message(1_001), message(1_002));
        let text = |on: &Message, words: &str| {
            Part::new(session.id.clone(), on.id().clone(), TextPart::new(words))
        };
        let row = |part: &Part| Arc::new(Upsert::of_part(part).unwrap());
        // Many parts, each written twice in the batch.
        let parts: Vec<Part> = (0..40)
            .map(|i| text(&first, &format!("part {i}")))
            .collect();
        let mut batch = vec![
            Arc::new(Upsert::of_session(&session).unwrap()),
            Arc::new(Upsert::of_message(&first, None).unwrap()),
            Arc::new(Upsert::of_message(&second, None).unwrap()),
        ];
        batch.extend(parts.iter().map(row));
        let mut last = parts.clone();
        for (i, part) in last.iter_mut().enumerate() {
            part.kind = TextPart::new(format!("part {i}, again")).into();
        }
        batch.extend(last.iter().map(row));
        upserts.write_all(batch).await.unwrap();
        // A later batch moves one part to the other message among parts that stay.
        let mut moved = last[7].clone();
        moved.message_id = second.id().clone();
        let mut again = vec![row(&last[6]), row(&moved), row(&last[8])];
        again.extend(last[9..20].iter().map(row));
        upserts.write_all(again).await.unwrap();

        let stored: Vec<(String, String, String)> =
            sqlx::query_as("SELECT id, message_id, data FROM part ORDER BY id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        assert_eq!(stored.len(), 40);
        for (i, part) in last.iter().enumerate() {
            let (_, parent, data) = stored
                .iter()
                .find(|(id, _, _)| id == part.id.as_str())
                .unwrap();
            let read: Part = serde_json::from_str(data).unwrap();
            let want = if i == 7 { second.id() } else { first.id() };
            assert_eq!(parent, want.as_str(), "part {i}");
            assert_eq!(read.message_id, *want, "part {i}");
            assert_eq!(read.kind, part.kind, "part {i}");
        }
    }

    #[tokio::test]
    async fn sessions_are_read_back_after_the_writes_before_with_their_row_time() {
        let (_dir, upserts, _conn) = upserter().await;
        let session = Session::new("proj", "/srv/p", "one", 1_000);
        let id = session.id.to_string();
        // Sent without waiting: the read comes after them all the same.
        let written = upserts.write_one(Arc::new(Upsert::of_session(&session).unwrap()));
        let touched = upserts.write_one(Arc::new(Upsert::Touch {
            id: id.clone(),
            at: 5_000,
        }));
        let missing = Session::new("proj", "/srv/p", "never written", 1_000);
        let ids = [id.clone(), missing.id.to_string()];
        let read = upserts.sessions(&ids);
        let (written, touched, read) = tokio::join!(written, touched, read);
        written.unwrap();
        touched.unwrap();
        let rows = read.unwrap();
        assert_eq!(rows.len(), 1, "only the stored session: {rows:?}");
        assert_eq!(rows[0].text("id").unwrap(), id);
        assert_eq!(rows[0].int("time_updated").unwrap(), 5_000);
        let stored: Session = serde_json::from_str(&rows[0].text("data").unwrap()).unwrap();
        assert_eq!(stored.title, "one");
        assert!(rows[0].text("title").is_err(), "no such column");
    }

    #[tokio::test]
    async fn the_log_grows_ahead_once_a_thousand_rows_were_written_and_none_came_for_a_moment() {
        use super::super::wal_room::{WAL_ROOM, WRITTEN_FIRST};
        let (dir, upserts, mut conn) = upserter().await;
        let wal = dir.path().join("test.db-wal");
        let size = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        let session = |title: &str| Session::new("proj", "/srv/p", title, 1_000);
        let rows = |n: usize| -> Vec<Arc<Upsert>> {
            (0..n)
                .map(|i| Arc::new(Upsert::of_session(&session(&format!("s{i}"))).unwrap()))
                .collect()
        };
        // (Before a thousand rows the room is not wanted: see `wal_room.rs`.)
        upserts.write_all(rows(10)).await.unwrap();
        assert!(size() < WAL_ROOM);
        upserts.write_all(rows(WRITTEN_FIRST)).await.unwrap();
        taskforce_testkit::wait::eventually("the log grown to its room", || size() == WAL_ROOM)
            .await;
        upserts
            .write_one(Arc::new(Upsert::of_session(&session("after")).unwrap()))
            .await
            .unwrap();
        assert_eq!(
            count(&mut conn, "session").await,
            i64::try_from(WRITTEN_FIRST + 11).unwrap()
        );
        assert_eq!(size(), WAL_ROOM, "written over the room");
    }

    #[tokio::test]
    async fn a_database_that_cannot_be_opened_is_an_error_not_a_thread() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no such folder").join("test.db");
        let error = Upserter::open(&missing, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(error.contains("unable to open"), "{error}");
    }
}
