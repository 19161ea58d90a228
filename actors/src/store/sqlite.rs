//! [`SqliteStore`]: the embedded [`Store`] — one SQLite file, WAL, one writer, a few readers.
//!
//! Every row keeps its domain value as serde JSON in `data` (OpenCode's shapes survive as they
//! are); the other columns copy the fields that queries filter and order on.
//!
//! Writes: a writer task owns the one write connection, so writes are serialized in-process and
//! never fight over the SQLite write lock. Upserts of sessions, messages and parts queue up for
//! it and it commits whatever has queued up together (group commit) in one statement: the rows
//! go as JSON into `write_batch`, whose trigger applies them all or none (see
//! `migrations/0002_write_batch.sql`). A caller that waits is answered after the commit, and
//! since the queue is committed in order, that also covers everything queued before. Other
//! writes (deletes, todo lists) run alone on the writer, in queue order.
//!
//! Reads use a few dedicated `query_only` connections and, in WAL mode, never wait for the
//! writer; a message with its parts is read in one statement, so it is one snapshot.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteRow, SqliteSynchronous};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use sqlx::{ConnectOptions, Connection, Row, SqliteConnection};
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};
use tokio::sync::{Mutex as AsyncMutex, MutexGuard as AsyncMutexGuard, OwnedMutexGuard};
use tokio::sync::{mpsc, oneshot};

use super::{MessageWithParts, SessionFilter, Store, StoreError};

/// The schema migrations in `actors/migrations`, embedded at compile time.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many read connections the store keeps at most.
const READERS: usize = 4;

/// How deep `delete_session` follows parent links; only a corrupt cycle gets near it.
const MAX_TREE_DEPTH: i64 = 4096;

/// The most upserts committed in one transaction.
const MAX_BATCH: usize = 1024;

/// The [`Store`] backed by the SQLite file `taskforce.db` in the data directory.
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
}

/// Read-only connections handed out round robin (cheaper than a pool's acquire and release).
#[derive(Debug)]
struct Readers {
    conns: Vec<AsyncMutex<SqliteConnection>>,
    next: AtomicUsize,
}

impl Readers {
    /// A free connection, else the next one in turn once it is free.
    async fn get(&self) -> AsyncMutexGuard<'_, SqliteConnection> {
        for conn in &self.conns {
            if let Ok(guard) = conn.try_lock() {
                return guard;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[i].lock().await
    }
}

/// A write that needs the connection to itself (its own transaction); it answers by itself.
type Exclusive =
    Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, ()> + Send + 'static>;

/// One row to insert or replace, with its bound values ready.
#[derive(Debug)]
enum Upsert {
    Session {
        id: String,
        parent: Option<String>,
        project: String,
        title: String,
        created: i64,
        updated: i64,
        data: String,
    },
    Message {
        id: String,
        session: String,
        created: i64,
        data: String,
    },
    Part {
        id: String,
        message: String,
        session: String,
        data: String,
    },
}

/// An upsert (or, without one, a barrier) committed with its batch; `done` hears of it.
#[derive(Debug)]
struct Batched {
    upsert: Option<Upsert>,
    context: String,
    done: Option<oneshot::Sender<Result<(), StoreError>>>,
}

/// A queued write for the writer task.
enum Job {
    /// Committed with the other upserts queued beside it.
    Batched(Batched),
    /// Several upserts that are sure to share a batch.
    Many(Vec<Batched>),
    /// Run alone, after the batch before it is committed.
    Exclusive(Exclusive),
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Batched(b) => write!(f, "Batched({})", b.context),
            Job::Many(v) => write!(f, "Many({})", v.len()),
            Job::Exclusive(_) => f.write_str("Exclusive"),
        }
    }
}

impl SqliteStore {
    /// The name of the database file inside the data directory.
    pub const FILE_NAME: &'static str = "taskforce.db";

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
            .optimize_on_close(true, None);
        let mut writer = writer_options
            .connect()
            .await
            .map_err(|e| open_error(format!("cannot open the database: {e}")))?;
        MIGRATOR
            .run(&mut writer)
            .await
            .map_err(|e| open_error(format!("cannot apply the migrations: {e}")))?;

        let read_options = base.clone().pragma("query_only", "ON");
        let mut conns = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let conn = read_options
                .connect()
                .await
                .map_err(|e| open_error(format!("cannot open read connections: {e}")))?;
            conns.push(AsyncMutex::new(conn));
        }

        tracing::debug!(path = %path.display(), "opened the store");
        let (queue, jobs) = mpsc::unbounded_channel();
        let conn = Arc::new(AsyncMutex::new(writer));
        let pending = Arc::new(AtomicUsize::new(0));
        tokio::spawn(write_batches(conn.clone(), pending.clone(), jobs));
        let checkpointer = base
            .connect()
            .await
            .map_err(|e| open_error(format!("cannot open the checkpoint connection: {e}")))?;
        tokio::spawn(checkpoint(checkpointer, queue.downgrade()));
        Ok(SqliteStore {
            path,
            readers: Arc::new(Readers {
                conns,
                next: AtomicUsize::new(0),
            }),
            queue,
            conn,
            pending,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the queued writes; the connections close when the last handle is dropped.
    pub async fn close(&self) {
        let _ = self.flush().await;
    }

    /// Hands a job to the writer task, counting its writes as pending.
    fn send(&self, job: Job) -> Result<(), StoreError> {
        let writes = match &job {
            Job::Batched(_) | Job::Exclusive(_) => 1,
            Job::Many(v) => v.len(),
        };
        self.pending.fetch_add(writes, Ordering::SeqCst);
        self.queue.send(job).map_err(|_| {
            self.pending.fetch_sub(writes, Ordering::SeqCst);
            StoreError::Database("the store is closed".into())
        })
    }

    /// The write connection, when nothing is queued or being written: the caller may write at
    /// once, and its write is ordered after everything before it.
    fn direct(&self) -> Option<OwnedMutexGuard<SqliteConnection>> {
        if self.pending.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let guard = self.conn.clone().try_lock_owned().ok()?;
        (self.pending.load(Ordering::SeqCst) == 0).then_some(guard)
    }

    /// Queues an upsert; waits for its commit when `wait`.
    async fn submit(&self, upsert: Upsert, context: String, wait: bool) -> Result<(), StoreError> {
        if wait && let Some(mut conn) = self.direct() {
            return run_upsert(&mut conn, &upsert)
                .await
                .map_err(database(context));
        }
        let (done, committed) = if wait {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let job = Job::Batched(Batched {
            upsert: Some(upsert),
            context: context.clone(),
            done,
        });
        self.send(job)
            .map_err(|e| StoreError::Database(format!("{context}: {e}")))?;
        match committed {
            Some(rx) => rx.await.unwrap_or_else(|_| {
                Err(StoreError::Database(format!(
                    "{context}: the writer stopped"
                )))
            }),
            None => Ok(()),
        }
    }

    /// Waits until every upsert queued so far is committed.
    async fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(Batched {
            upsert: None,
            context: "flush".into(),
            done: Some(tx),
        });
        self.send(job)?;
        rx.await
            .unwrap_or_else(|_| Err(StoreError::Database("the writer stopped".into())))
    }

    /// Runs `work` on the write connection alone, after every write queued before it.
    async fn exclusive<T: Send + 'static>(
        &self,
        context: String,
        work: impl for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
        + Send
        + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Exclusive(Box::new(move |conn| {
            Box::pin(async move {
                let _ = tx.send(work(conn).await);
            })
        }));
        self.send(job)
            .map_err(|e| StoreError::Database(format!("{context}: {e}")))?;
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Database(format!(
                "{context}: the writer stopped"
            )))
        })
    }

    /// A session row, ready to queue.
    fn session_upsert(session: &Session) -> Result<Upsert, StoreError> {
        Ok(Upsert::Session {
            id: session.id.to_string(),
            parent: session.parent_id.as_ref().map(ToString::to_string),
            project: session.project_id.clone(),
            title: session.title.clone(),
            created: to_sql(session.time.created),
            updated: to_sql(session.time.updated),
            data: encode("session", session.id.as_str(), session)?,
        })
    }

    /// A message row, ready to queue.
    fn message_upsert(message: &Message) -> Result<Upsert, StoreError> {
        let id = message.id().as_str();
        Ok(Upsert::Message {
            id: id.to_string(),
            session: message.session_id().to_string(),
            created: to_sql(message.created()),
            data: encode("message", id, message)?,
        })
    }

    /// Queues an upsert without waiting; a failure to build or queue it is logged.
    fn enqueue(&self, upsert: Result<Upsert, StoreError>, context: String) {
        match upsert {
            Ok(upsert) => {
                let job = Job::Batched(Batched {
                    upsert: Some(upsert),
                    context,
                    done: None,
                });
                if self.send(job).is_err() {
                    tracing::warn!("the store is closed; an update was dropped");
                }
            }
            Err(e) => tracing::warn!("{context}: {e}"),
        }
    }

    /// A part row, ready to queue.
    fn part_upsert(part: &Part) -> Result<Upsert, StoreError> {
        Ok(Upsert::Part {
            id: part.id.to_string(),
            message: part.message_id.to_string(),
            session: part.session_id.to_string(),
            data: encode("part", part.id.as_str(), part)?,
        })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        let context = format!("cannot store session {}", session.id);
        self.submit(Self::session_upsert(session)?, context, true)
            .await
    }

    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        let row = sqlx::query("SELECT id, data FROM session WHERE id = ?1")
            .bind(id.as_str())
            .fetch_optional(&mut *self.readers.get().await)
            .await
            .map_err(database(format_args!("cannot read session {id}")))?;
        row.map(|row| decode_session(&row)).transpose()
    }

    async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        let limit = filter
            .limit
            .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let rows = sqlx::query(
            "SELECT id, data FROM session \
             WHERE (?1 = 0 OR parent_id IS NULL) \
               AND (?2 IS NULL OR time_updated >= ?2) \
               AND (?3 IS NULL OR instr(title_folded, ?3) > 0) \
             ORDER BY time_updated DESC, id DESC \
             LIMIT ?4",
        )
        .bind(filter.roots)
        .bind(filter.start.map(to_sql))
        .bind(filter.search.as_deref().map(str::to_lowercase))
        .bind(limit)
        .fetch_all(&mut *self.readers.get().await)
        .await
        .map_err(database("cannot list sessions"))?;
        rows.iter().map(decode_session).collect()
    }

    async fn children(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, data FROM session WHERE parent_id = ?1 \
             ORDER BY time_created ASC, id ASC",
        )
        .bind(id.as_str())
        .fetch_all(&mut *self.readers.get().await)
        .await
        .map_err(database(format_args!(
            "cannot list the children of session {id}"
        )))?;
        rows.iter().map(decode_session).collect()
    }

    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        let context = format!("cannot delete session {id}");
        let id = id.clone();
        self.exclusive(context.clone(), move |conn| {
            Box::pin(delete_tree(conn, id, context))
        })
        .await
    }

    async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        let context = format!(
            "cannot store message {} of session {}",
            message.id(),
            message.session_id()
        );
        self.submit(Self::message_upsert(message)?, context, true)
            .await
    }

    async fn message(
        &self,
        session: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        let context = format!("cannot read message {id} of session {session}");
        // One statement, so one snapshot and one round trip to the database thread.
        let rows = sqlx::query(
            "SELECT 0 AS kind, id, data FROM message WHERE id = ?1 AND session_id = ?2 \
             UNION ALL \
             SELECT 1 AS kind, id, data FROM part WHERE message_id = ?1 AND session_id = ?2 \
             ORDER BY kind, id",
        )
        .bind(id.as_str())
        .bind(session.as_str())
        .fetch_all(&mut *self.readers.get().await)
        .await
        .map_err(database(&context))?;
        Ok(assemble(&rows, &context)?.pop())
    }

    async fn messages(&self, session: &SessionId) -> Result<Vec<MessageWithParts>, StoreError> {
        let context = format!("cannot read the messages of session {session}");
        // One statement, so one snapshot and one round trip to the database thread.
        let rows = sqlx::query(
            "SELECT 0 AS kind, id, data FROM message WHERE session_id = ?1 \
             UNION ALL \
             SELECT 1 AS kind, id, data FROM part WHERE session_id = ?1 \
             ORDER BY kind, id",
        )
        .bind(session.as_str())
        .fetch_all(&mut *self.readers.get().await)
        .await
        .map_err(database(&context))?;
        assemble(&rows, &context)
    }

    async fn remove_message(&self, session: &SessionId, id: &MessageId) -> Result<(), StoreError> {
        let context = format!("cannot delete message {id} of session {session}");
        let (session, id) = (session.to_string(), id.to_string());
        self.exclusive(context.clone(), move |conn| {
            Box::pin(async move {
                // Its parts go with it through `ON DELETE CASCADE`.
                sqlx::query("DELETE FROM message WHERE id = ?1 AND session_id = ?2")
                    .bind(id)
                    .bind(session)
                    .execute(conn)
                    .await
                    .map(|_| ())
                    .map_err(database(context))
            })
        })
        .await
    }

    async fn put_part(&self, part: &Part) -> Result<(), StoreError> {
        let context = format!(
            "cannot store part {} of message {}",
            part.id, part.message_id
        );
        self.submit(Self::part_upsert(part)?, context, true).await
    }

    async fn put_many(
        &self,
        sessions: &[&Session],
        messages: &[&Message],
        parts: &[&Part],
    ) -> Result<(), StoreError> {
        let mut jobs = Vec::with_capacity(sessions.len() + messages.len() + parts.len());
        let mut answers = Vec::with_capacity(jobs.capacity());
        let rows = sessions
            .iter()
            .map(|s| {
                let context = format!("cannot store session {}", s.id);
                Self::session_upsert(s).map(|u| (u, context))
            })
            .chain(messages.iter().map(|m| {
                let context = format!(
                    "cannot store message {} of session {}",
                    m.id(),
                    m.session_id()
                );
                Self::message_upsert(m).map(|u| (u, context))
            }))
            .chain(parts.iter().map(|p| {
                let context = format!("cannot store part {} of message {}", p.id, p.message_id);
                Self::part_upsert(p).map(|u| (u, context))
            }));
        let rows: Vec<(Upsert, String)> = rows.collect::<Result<_, _>>()?;
        if let Some(mut conn) = self.direct() {
            let results = apply(&mut conn, rows.iter().map(|(u, c)| (Some(u), c.as_str()))).await;
            return results.into_iter().collect();
        }
        for (upsert, context) in rows {
            let (tx, rx) = oneshot::channel();
            jobs.push(Batched {
                upsert: Some(upsert),
                context,
                done: Some(tx),
            });
            answers.push(rx);
        }
        // One job, so the rows share a batch: one statement, one commit.
        self.send(Job::Many(jobs))?;
        for answer in answers {
            answer
                .await
                .unwrap_or_else(|_| Err(StoreError::Database("the writer stopped".into())))?;
        }
        Ok(())
    }

    fn queue_part(&self, part: &Part) {
        let context = format!(
            "cannot store part {} of message {}",
            part.id, part.message_id
        );
        self.enqueue(Self::part_upsert(part), context);
    }

    fn queue_message(&self, message: &Message) {
        let context = format!("cannot store message {}", message.id());
        self.enqueue(Self::message_upsert(message), context);
    }

    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError> {
        let context = format!("cannot delete part {id}");
        let id = id.to_string();
        self.exclusive(context.clone(), move |conn| {
            Box::pin(async move {
                sqlx::query("DELETE FROM part WHERE id = ?1")
                    .bind(id)
                    .execute(conn)
                    .await
                    .map(|_| ())
                    .map_err(database(context))
            })
        })
        .await
    }

    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, StoreError> {
        let rows =
            sqlx::query("SELECT position, data FROM todo WHERE session_id = ?1 ORDER BY position")
                .bind(session.as_str())
                .fetch_all(&mut *self.readers.get().await)
                .await
                .map_err(database(format_args!(
                    "cannot read the todos of session {session}"
                )))?;
        rows.iter()
            .map(|row| {
                let position: i64 = row.try_get("position").unwrap_or(-1);
                let id = format!("{session}#{position}");
                let data: String = row.try_get("data").map_err(|e| corrupt("todo", &id, e))?;
                serde_json::from_str(&data).map_err(|e| corrupt("todo", &id, e))
            })
            .collect()
    }

    async fn put_todos(&self, session: &SessionId, todos: &[Todo]) -> Result<(), StoreError> {
        let context = format!("cannot store the todos of session {session}");
        let session = session.clone();
        let todos = todos.to_vec();
        self.exclusive(context.clone(), move |conn| {
            Box::pin(replace_todos(conn, session, todos, context))
        })
        .await
    }
}

/// Deletes a session's whole subtree in one transaction; descendants come first in the result.
async fn delete_tree(
    conn: &mut SqliteConnection,
    id: SessionId,
    context: String,
) -> Result<Vec<Session>, StoreError> {
    let mut tx = conn.begin().await.map_err(database(&context))?;
    // Deepest first, so every descendant precedes its ancestors. `MAX` keeps one row per
    // session should a corrupt parent cycle make the walk revisit sessions.
    let rows = sqlx::query(
        "WITH RECURSIVE tree (id, depth) AS ( \
               SELECT id, 0 FROM session WHERE id = ?1 \
               UNION ALL \
               SELECT s.id, t.depth + 1 FROM session s JOIN tree t ON s.parent_id = t.id \
               WHERE t.depth < ?2 \
             ) \
             SELECT s.id AS id, s.data AS data, MAX(t.depth) AS depth \
             FROM tree t JOIN session s ON s.id = t.id \
             GROUP BY s.id \
             ORDER BY depth DESC, s.id DESC",
    )
    .bind(id.as_str())
    .bind(MAX_TREE_DEPTH)
    .fetch_all(&mut *tx)
    .await
    .map_err(database(&context))?;

    let mut ids = Vec::with_capacity(rows.len());
    let mut deleted = Vec::with_capacity(rows.len());
    for row in &rows {
        let row_id: String = row.try_get("id").map_err(database(&context))?;
        // An unreadable session is deleted all the same: deleting is how it gets cleaned up.
        match decode_session(row) {
            Ok(session) => deleted.push(session),
            Err(error) => tracing::warn!(%error, "deleting an unreadable session"),
        }
        ids.push(row_id);
    }
    if ids.is_empty() {
        return Ok(deleted);
    }
    let ids =
        serde_json::to_string(&ids).map_err(|e| StoreError::Database(format!("{context}: {e}")))?;
    sqlx::query("DELETE FROM todo WHERE session_id IN (SELECT value FROM json_each(?1))")
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    // Messages and their parts go with their session through `ON DELETE CASCADE`.
    sqlx::query("DELETE FROM session WHERE id IN (SELECT value FROM json_each(?1))")
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    tx.commit().await.map_err(database(&context))?;
    Ok(deleted)
}

/// Replaces a session's todo list in one transaction.
async fn replace_todos(
    conn: &mut SqliteConnection,
    session: SessionId,
    todos: Vec<Todo>,
    context: String,
) -> Result<(), StoreError> {
    let mut tx = conn.begin().await.map_err(database(&context))?;
    sqlx::query("DELETE FROM todo WHERE session_id = ?1")
        .bind(session.as_str())
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    for (position, todo) in todos.iter().enumerate() {
        let data = encode("todo", &todo.id, todo)?;
        sqlx::query("INSERT INTO todo (session_id, position, data) VALUES (?1, ?2, ?3)")
            .bind(session.as_str())
            .bind(i64::try_from(position).unwrap_or(i64::MAX))
            .bind(data)
            .execute(&mut *tx)
            .await
            .map_err(database(&context))?;
    }
    tx.commit().await.map_err(database(&context))?;
    Ok(())
}

/// The writer task: owns the write connection and commits queued upserts in batches, one
/// transaction each, answering after the commit; exclusive writes run alone, in queue order.
async fn write_batches(
    conn: Arc<AsyncMutex<SqliteConnection>>,
    in_flight: Arc<AtomicUsize>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    let mut pending: Option<Job> = None;
    loop {
        let first = match pending.take() {
            Some(job) => job,
            None => match jobs.recv().await {
                Some(job) => job,
                None => break,
            },
        };
        let mut batch = match first {
            Job::Exclusive(work) => {
                work(&mut *conn.lock().await).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            Job::Batched(b) => vec![b],
            Job::Many(v) => v,
        };
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(Job::Exclusive(work)) => {
                    pending = Some(Job::Exclusive(work));
                    break;
                }
                Ok(Job::Batched(b)) => batch.push(b),
                Ok(Job::Many(v)) => batch.extend(v),
                Err(_) => break,
            }
        }
        let writes = batch.len();
        commit_batch(&mut *conn.lock().await, batch).await;
        in_flight.fetch_sub(writes, Ordering::SeqCst);
    }
}

/// How often the write-ahead log is folded back into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Folds the write-ahead log into the database every second, off the write path, for as long
/// as the store is open. Passive checkpoints never block the writer or readers.
async fn checkpoint(mut conn: SqliteConnection, store: mpsc::WeakUnboundedSender<Job>) {
    let mut ticks = tokio::time::interval(CHECKPOINT_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if store.upgrade().is_none() {
            break;
        }
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut conn)
            .await
        {
            tracing::warn!("checkpoint failed: {e}");
        }
    }
    let _ = conn.close().await;
}

/// Commits a batch of upserts in one statement (see the module doc), then answers each.
async fn commit_batch(conn: &mut SqliteConnection, batch: Vec<Batched>) {
    let results = apply(
        conn,
        batch
            .iter()
            .map(|b| (b.upsert.as_ref(), b.context.as_str())),
    )
    .await;
    for (Batched { done, .. }, outcome) in batch.into_iter().zip(results) {
        match done {
            Some(done) => {
                let _ = done.send(outcome);
            }
            None => {
                if let Err(e) = outcome {
                    tracing::warn!("a queued write failed: {e}");
                }
            }
        }
    }
}

/// Writes upserts (`None` entries are barriers) in one statement; when it fails, row by row, so
/// that only the rows at fault report an error. Returns one result per entry.
async fn apply<'a>(
    conn: &mut SqliteConnection,
    entries: impl Iterator<Item = (Option<&'a Upsert>, &'a str)>,
) -> Vec<Result<(), StoreError>> {
    let entries: Vec<(Option<&Upsert>, &str)> = entries.collect();
    let upserts: Vec<&Upsert> = entries.iter().filter_map(|(u, _)| *u).collect();
    let mut results: Vec<Result<(), StoreError>> = (0..entries.len()).map(|_| Ok(())).collect();
    let applied = match upserts.as_slice() {
        [] => Ok(()),
        // One row is written directly.
        [one] => run_upsert(conn, one).await,
        // Many rows in one statement: the `write_batch` trigger applies them all or none.
        many => sqlx::query("INSERT INTO write_batch (payload) VALUES (?1)")
            .bind(batch_payload(many))
            .execute(&mut *conn)
            .await
            .map(|_| ()),
    };
    if let Err(error) = applied {
        if upserts.len() == 1 {
            if let Some(i) = entries.iter().position(|(u, _)| u.is_some()) {
                results[i] = Err(database(entries[i].1)(error));
            }
        } else {
            for (i, (upsert, context)) in entries.iter().enumerate() {
                if let Some(upsert) = upsert {
                    results[i] = run_upsert(conn, upsert).await.map_err(database(context));
                }
            }
        }
    }
    results
}

/// The JSON of a batch for the `write_batch` trigger: column arrays per table, in queue order.
fn batch_payload(upserts: &[&Upsert]) -> String {
    let (mut sessions, mut messages, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    for upsert in upserts {
        match upsert {
            Upsert::Session {
                id,
                parent,
                project,
                title,
                created,
                updated,
                data,
            } => sessions.push(serde_json::json!([
                id,
                parent,
                project,
                title,
                title.to_lowercase(),
                created,
                updated,
                data
            ])),
            Upsert::Message {
                id,
                session,
                created,
                data,
            } => messages.push(serde_json::json!([id, session, created, data])),
            Upsert::Part {
                id,
                message,
                session,
                data,
            } => parts.push(serde_json::json!([id, message, session, data])),
        }
    }
    serde_json::json!({"s": sessions, "m": messages, "p": parts}).to_string()
}

/// Runs one upsert on the writer's transaction.
async fn run_upsert(conn: &mut SqliteConnection, upsert: &Upsert) -> Result<(), sqlx::Error> {
    match upsert {
        Upsert::Session {
            id,
            parent,
            project,
            title,
            created,
            updated,
            data,
        } => {
            sqlx::query(
                "INSERT INTO session \
                   (id, parent_id, project_id, title, title_folded, time_created, time_updated, data) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (id) DO UPDATE SET \
                   parent_id = excluded.parent_id, project_id = excluded.project_id, \
                   title = excluded.title, title_folded = excluded.title_folded, \
                   time_created = excluded.time_created, time_updated = excluded.time_updated, \
                   data = excluded.data",
            )
            .bind(id)
            .bind(parent)
            .bind(project)
            .bind(title)
            .bind(title.to_lowercase())
            .bind(created)
            .bind(updated)
            .bind(data)
            .execute(conn)
            .await?;
        }
        Upsert::Message {
            id,
            session,
            created,
            data,
        } => {
            // An upsert, not `INSERT OR REPLACE`: replacing would delete the message's parts.
            sqlx::query(
                "INSERT INTO message (id, session_id, time_created, data) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, \
                   time_created = excluded.time_created, data = excluded.data",
            )
            .bind(id)
            .bind(session)
            .bind(created)
            .bind(data)
            .execute(conn)
            .await?;
        }
        Upsert::Part {
            id,
            message,
            session,
            data,
        } => {
            sqlx::query(
                "INSERT INTO part (id, message_id, session_id, data) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id, \
                   session_id = excluded.session_id, data = excluded.data",
            )
            .bind(id)
            .bind(message)
            .bind(session)
            .bind(data)
            .execute(conn)
            .await?;
        }
    }
    Ok(())
}

/// Messages (kind 0) and parts (kind 1), each ordered by id, put together; parts of messages
/// that are not in the rows are dropped.
fn assemble(rows: &[SqliteRow], context: &str) -> Result<Vec<MessageWithParts>, StoreError> {
    let mut messages: Vec<MessageWithParts> = Vec::new();
    let mut index: HashMap<MessageId, usize> = HashMap::new();
    for row in rows {
        let kind: i64 = row.try_get("kind").map_err(database(context))?;
        if kind == 0 {
            let info = decode_message(row)?;
            index.insert(info.id().clone(), messages.len());
            messages.push(MessageWithParts {
                info,
                parts: Vec::new(),
            });
        } else {
            let part = decode_part(row)?;
            if let Some(&i) = index.get(&part.message_id) {
                messages[i].parts.push(part);
            }
        }
    }
    Ok(messages)
}

/// Maps a database error to [`StoreError::Database`], prefixed by what was being done.
fn database(context: impl Display) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| StoreError::Database(format!("{context}: {error}"))
}

/// A [`StoreError::Corrupt`] for the row `id` of `what`.
fn corrupt(what: &'static str, id: &str, message: impl Display) -> StoreError {
    StoreError::Corrupt {
        what,
        id: id.to_string(),
        message: message.to_string(),
    }
}

/// An epoch-milliseconds time as an SQLite integer (saturating far beyond any real date).
fn to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The JSON payload of a domain value.
fn encode<T: Serialize>(what: &str, id: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("cannot encode {what} {id}: {e}")))
}

/// The `id` and `data` columns of a row, decoded as `T`; the payload must carry the row's id.
fn decode_row<T: DeserializeOwned>(
    row: &SqliteRow,
    what: &'static str,
    payload_id: impl Fn(&T) -> &str,
) -> Result<T, StoreError> {
    let id: String = row
        .try_get("id")
        .map_err(|e| corrupt(what, "(unknown)", e))?;
    let data: String = row.try_get("data").map_err(|e| corrupt(what, &id, e))?;
    let value: T = serde_json::from_str(&data).map_err(|e| corrupt(what, &id, e))?;
    let inner = payload_id(&value);
    if inner != id {
        return Err(corrupt(
            what,
            &id,
            format_args!("the payload is {what} {inner}"),
        ));
    }
    Ok(value)
}

/// A session row.
fn decode_session(row: &SqliteRow) -> Result<Session, StoreError> {
    decode_row(row, "session", |s: &Session| s.id.as_str())
}

/// A message row.
fn decode_message(row: &SqliteRow) -> Result<Message, StoreError> {
    decode_row(row, "message", |m: &Message| m.id().as_str())
}

/// A part row.
fn decode_part(row: &SqliteRow) -> Result<Part, StoreError> {
    decode_row(row, "part", |p: &Part| p.id.as_str())
}
