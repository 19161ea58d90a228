//! [`SqliteStore`]: the embedded [`Store`] — one SQLite file, WAL, one writer, a few readers.
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
//! error (see `writer.rs`). A caller that waits is answered after the commit, and since the
//! queue is committed in order, that also covers everything queued before. Writes queued
//! without waiting are read-your-writes: a read of their session waits for their commit
//! (`unflushed.rs`). Other writes (deletes, todo lists, permission approvals) run alone on the
//! writer, in queue order. When nothing is queued, an awaited write runs at once on the
//! caller's task, on the same connection.
//!
//! Reads use a few dedicated `query_only` connections and, in WAL mode, never wait for the
//! writer; a message with its parts is read in one statement, so it is one snapshot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use sqlx::{ConnectOptions, Row, SqliteConnection};
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};
use tokio::sync::{Mutex as AsyncMutex, MutexGuard as AsyncMutexGuard, OwnedMutexGuard};
use tokio::sync::{mpsc, oneshot};

use super::{
    Approval, BackgroundTask, MessageWithParts, SessionFilter, Store, StoreError, Unfinished,
};

mod answers;
mod approvals;
mod background;
mod rows;
mod unflushed;
mod writer;

use rows::*;
use unflushed::Unflushed;
use writer::*;

/// The file beside the database that one process at a time locks to apply the migrations.
const MIGRATION_LOCK: &str = "taskforce.db.migrate-lock";

/// The schema migrations in `actors/migrations`, embedded at compile time.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The error of a write whose waiter was dropped: the writer task stopped before answering.
fn writer_stopped() -> StoreError {
    StoreError::Database("the writer stopped".into())
}

/// How many read connections the store keeps at most.
const READERS: usize = 4;

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
    /// Writes queued without waiting that reads must see (read-your-writes).
    unflushed: Arc<Unflushed>,
    /// The runtime writing through this store, once named: its unfinished answers carry its
    /// id (see `answers.rs`).
    runtime: Arc<OnceLock<Arc<str>>>,
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
        MIGRATOR
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

        tracing::debug!(path = %path.display(), "opened the store");
        let (queue, jobs) = mpsc::unbounded_channel();
        let conn = Arc::new(AsyncMutex::new(writer));
        let pending = Arc::new(AtomicUsize::new(0));
        let unflushed = Arc::new(Unflushed::default());
        tokio::spawn(write_batches(
            conn.clone(),
            pending.clone(),
            unflushed.clone(),
            jobs,
        ));
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
            unflushed,
            runtime: Arc::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the queued writes; the connections close when the last handle is dropped.
    pub async fn close(&self) {
        let _ = self.flush_queue().await;
    }

    /// Hands a job to the writer task, counting its writes as pending; answers the job's
    /// sequence number (see [`Unflushed`]).
    fn send(&self, job: Job) -> Result<u64, StoreError> {
        let writes = match &job {
            Job::Batched(_) | Job::Exclusive(_) => 1,
            Job::Many(v) => v.len(),
            Job::Values(v) => v.len(),
        };
        let urgent = job.urgent();
        self.pending.fetch_add(writes, Ordering::SeqCst);
        let seq = self
            .unflushed
            .send(|| self.queue.send(job).map_err(|refused| refused.0.closed()))
            .inspect_err(|_| {
                self.pending.fetch_sub(writes, Ordering::SeqCst);
            })?;
        if urgent {
            // The writer may be lingering over writes nobody waits for: this one is waited for.
            self.unflushed.hurry();
        }
        Ok(seq)
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

    /// Writes an upsert and waits for its commit.
    async fn submit(&self, upsert: Upsert) -> Result<(), StoreError> {
        if let Some(mut conn) = self.direct() {
            return run_upsert(&mut conn, &upsert)
                .await
                .map_err(|e| upsert.failed(e));
        }
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(Batched {
            upsert: Some(upsert),
            done: Some(tx),
        });
        self.send(job)?;
        rx.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Waits until every upsert queued so far is committed.
    async fn flush_queue(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(Batched {
            upsert: None,
            done: Some(tx),
        });
        self.send(job)?;
        rx.await.unwrap_or_else(|_| Err(writer_stopped()))
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
            folded: session.title.to_lowercase(),
            created: to_sql(session.time.created),
            updated: to_sql(session.time.updated),
            data: encode("session", session.id.as_str(), session)?,
        })
    }

    /// A message row, ready to queue; an unfinished answer names the runtime writing it
    /// (`runtime`, else nobody: '').
    fn message_upsert(message: &Message, runtime: Option<&Arc<str>>) -> Result<Upsert, StoreError> {
        let id = message.id().as_str();
        let unfinished = message
            .as_assistant()
            .is_some_and(|a| a.time.completed.is_none());
        Ok(Upsert::Message {
            id: id.to_string(),
            session: message.session_id().to_string(),
            created: to_sql(message.created()),
            owner: unfinished.then(|| runtime.cloned().unwrap_or_else(|| Arc::from(""))),
            data: encode("message", id, message)?,
        })
    }

    /// Queues an upsert without waiting; a failure to build or queue it is logged.
    fn enqueue(&self, upsert: Result<Upsert, StoreError>) {
        match upsert {
            Ok(upsert) => {
                let session = upsert.session().to_string();
                let job = Job::Batched(Batched {
                    upsert: Some(upsert),
                    done: None,
                });
                match self.send(job) {
                    Ok(seq) => self.unflushed.behind(seq, [session.as_str()]),
                    Err(_) => tracing::warn!("the store is closed; an update was dropped"),
                }
            }
            Err(e) => tracing::warn!("cannot queue a write: {e}"),
        }
    }

    /// The rows of sessions, messages and parts, in that order.
    fn rows(
        &self,
        sessions: &[&Session],
        messages: &[&Message],
        parts: &[&Part],
    ) -> Result<Vec<Upsert>, StoreError> {
        let mut rows = Vec::with_capacity(sessions.len() + messages.len() + parts.len());
        for session in sessions {
            rows.push(Self::session_upsert(session)?);
        }
        for message in messages {
            rows.push(Self::message_upsert(message, self.runtime.get())?);
        }
        for part in parts {
            rows.push(Self::part_upsert(part)?);
        }
        Ok(rows)
    }

    /// The rows of what can be encoded among sessions, messages and parts; the rest is logged
    /// (for writes nobody waits for, where there is nobody to tell).
    fn rows_lossy(
        sessions: &[Session],
        messages: &[Arc<Message>],
        parts: &[Arc<Part>],
        runtime: Option<&Arc<str>>,
    ) -> Vec<Upsert> {
        let logged = |e: StoreError| tracing::warn!("a queued write was dropped: {e}");
        let mut out = Vec::with_capacity(sessions.len() + messages.len() + parts.len());
        out.extend(
            sessions
                .iter()
                .filter_map(|s| Self::session_upsert(s).map_err(logged).ok()),
        );
        out.extend(
            messages
                .iter()
                .filter_map(|m| Self::message_upsert(m, runtime).map_err(logged).ok()),
        );
        out.extend(
            parts
                .iter()
                .filter_map(|p| Self::part_upsert(p).map_err(logged).ok()),
        );
        out
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
        self.submit(Self::session_upsert(session)?).await
    }

    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        self.unflushed.settled(id.as_str()).await;
        let row = sqlx::query("SELECT id, data FROM session WHERE id = ?1")
            .bind(id.as_str())
            .fetch_optional(&mut *self.readers.get().await)
            .await
            .map_err(database(format_args!("cannot read session {id}")))?;
        row.map(|row| decode_session(&row)).transpose()
    }

    async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        self.unflushed.all_settled().await;
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
        self.unflushed.all_settled().await;
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
        self.submit(Self::message_upsert(message, self.runtime.get())?)
            .await
    }

    async fn message(
        &self,
        session: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        self.unflushed.settled(session.as_str()).await;
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
        self.unflushed.settled(session.as_str()).await;
        let context = format!("cannot read the messages of session {session}");
        // One statement, so one snapshot and one round trip to the database thread.
        let rows = sqlx::query(
            // Messages by creation time, ties in the order they were first stored (upserts
            // keep the rowid), so that client-chosen ids of another scheme (OpenCode's) cannot
            // reorder the history; parts by id.
            "SELECT 0 AS kind, time_created AS t, rowid AS ord, id, data FROM message \
             WHERE session_id = ?1 \
             UNION ALL \
             SELECT 1 AS kind, 0 AS t, 0 AS ord, id, data FROM part WHERE session_id = ?1 \
             ORDER BY kind, t, ord, id",
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
        self.submit(Self::part_upsert(part)?).await
    }

    async fn put_many(
        &self,
        sessions: &[&Session],
        messages: &[&Message],
        parts: &[&Part],
    ) -> Result<(), StoreError> {
        let rows = self.rows(sessions, messages, parts)?;
        if let Some(mut conn) = self.direct() {
            let results = apply(&mut conn, rows.iter().map(Some)).await;
            return results.into_iter().collect();
        }
        let mut jobs = Vec::with_capacity(rows.len());
        let mut answers = Vec::with_capacity(rows.len());
        for upsert in rows {
            let (tx, rx) = oneshot::channel();
            jobs.push(Batched {
                upsert: Some(upsert),
                done: Some(tx),
            });
            answers.push(rx);
        }
        // One job, so the rows share a batch: one transaction, one commit.
        self.send(Job::Many(jobs))?;
        for answer in answers {
            answer.await.unwrap_or_else(|_| Err(writer_stopped()))?;
        }
        Ok(())
    }

    fn queue_part(&self, part: &Part) {
        self.enqueue(Self::part_upsert(part));
    }

    fn queue_many(
        &self,
        sessions: Vec<Session>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    ) {
        // The sessions written, each run of rows of one session once (copies of their ids
        // share the text).
        let mut written: Vec<SessionId> = Vec::with_capacity(1);
        let ids = sessions
            .iter()
            .map(|s| &s.id)
            .chain(messages.iter().map(|m| m.session_id()))
            .chain(parts.iter().map(|p| &p.session_id));
        for session in ids {
            if written.last() != Some(session) {
                written.push(session.clone());
            }
        }
        let values = Values {
            sessions,
            messages,
            parts,
            runtime: self.runtime.get().cloned(),
        };
        // One job, so the rows share a batch: one transaction, one commit; encoded by the
        // writer, not here.
        match self.send(Job::Values(Box::new(values))) {
            Ok(seq) => self
                .unflushed
                .behind(seq, written.iter().map(SessionId::as_str)),
            Err(_) => tracing::warn!("the store is closed; an update was dropped"),
        }
    }

    fn queue_message(&self, message: &Message) {
        self.enqueue(Self::message_upsert(message, self.runtime.get()));
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

    async fn approvals(&self, project: &str) -> Result<Vec<Approval>, StoreError> {
        approvals::read(&mut *self.readers.get().await, project).await
    }

    async fn add_approvals(&self, project: &str, approvals: &[Approval]) -> Result<(), StoreError> {
        if approvals.is_empty() {
            return Ok(());
        }
        let context = format!("cannot store the approvals of project {project}");
        let (project, approvals) = (project.to_string(), approvals.to_vec());
        self.exclusive(context.clone(), move |conn| {
            Box::pin(approvals::insert(conn, project, approvals, context))
        })
        .await
    }

    async fn put_background(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let context = format!("cannot store background task {}", task.child_id);
        let task = task.clone();
        self.exclusive(context.clone(), move |conn| {
            Box::pin(background::put(conn, task, context))
        })
        .await
    }

    async fn background(&self, child: &SessionId) -> Result<Option<BackgroundTask>, StoreError> {
        background::one(&mut *self.readers.get().await, child).await
    }

    async fn undelivered_background(&self) -> Result<Vec<BackgroundTask>, StoreError> {
        background::undelivered(&mut *self.readers.get().await).await
    }

    async fn claim_background(
        &self,
        child: &SessionId,
        from: Option<&str>,
        to: &str,
    ) -> Result<bool, StoreError> {
        let context = format!("cannot take over background task {child}");
        let (child, from, to) = (child.clone(), from.map(str::to_string), to.to_string());
        self.exclusive(context.clone(), move |conn| {
            Box::pin(background::claim(conn, child, from, to, context))
        })
        .await
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.flush_queue().await
    }

    fn set_runtime(&self, runtime: &str) {
        let _ = self.runtime.set(Arc::from(runtime));
    }

    async fn unfinished_answers(
        &self,
        session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        if let Some(session) = session {
            self.unflushed.settled(session.as_str()).await;
        } else {
            self.unflushed.all_settled().await;
        }
        answers::unfinished(&mut *self.readers.get().await, session).await
    }

    async fn claim_unfinished(
        &self,
        from: &str,
        to: &str,
        session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        let context = format!("cannot take over the unfinished answers of runtime {from:?}");
        let (from, to, session) = (from.to_string(), to.to_string(), session.cloned());
        self.exclusive(context.clone(), move |conn| {
            Box::pin(answers::claim(conn, from, to, session, context))
        })
        .await
    }
}
