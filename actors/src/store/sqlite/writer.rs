//! The write side of the SQLite store: queued jobs, group commit, checkpoints.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::{Connection, Row, SqliteConnection};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Part, Session, Todo};
use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::{mpsc, oneshot};

use crate::store::StoreError;

use super::rows::*;
use super::unflushed::Unflushed;

/// How deep `delete_session` follows parent links; only a corrupt cycle gets near it.
const MAX_TREE_DEPTH: i64 = 4096;

/// The most upserts committed in one transaction.
pub(super) const MAX_BATCH: usize = 1024;

/// A write that needs the connection to itself (its own transaction); it answers by itself.
pub(super) type Exclusive =
    Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, ()> + Send + 'static>;

/// One row to insert or replace, with its bound values ready.
#[derive(Debug)]
pub(super) enum Upsert {
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

impl Upsert {
    /// The session the row belongs to.
    pub(super) fn session(&self) -> &str {
        match self {
            Upsert::Session { id, .. } => id,
            Upsert::Message { session, .. } | Upsert::Part { session, .. } => session,
        }
    }
}

/// An upsert (or, without one, a barrier) committed with its batch; `done` hears of it.
#[derive(Debug)]
pub(super) struct Batched {
    pub upsert: Option<Upsert>,
    pub context: String,
    pub done: Option<oneshot::Sender<Result<(), StoreError>>>,
}

/// A queued write for the writer task.
pub(super) enum Job {
    /// Committed with the other upserts queued beside it.
    Batched(Batched),
    /// Several upserts that are sure to share a batch.
    Many(Vec<Batched>),
    /// Run alone, after the batch before it is committed.
    Exclusive(Exclusive),
    /// Sessions, messages and parts nobody waits for, encoded by the writer when it takes them
    /// (so that the caller does not spend the time), then committed like `Many`.
    Values(Box<Values>),
}

/// Domain values queued to be stored together, sessions first, then messages, then parts.
#[derive(Debug, Default)]
pub(super) struct Values {
    pub sessions: Vec<Session>,
    pub messages: Vec<Message>,
    pub parts: Vec<Part>,
}

impl Values {
    /// How many rows they make.
    pub fn len(&self) -> usize {
        self.sessions.len() + self.messages.len() + self.parts.len()
    }

    /// Their rows, ready to commit; a value that cannot be encoded is logged and left out.
    fn into_batched(self) -> Vec<Batched> {
        let sessions: Vec<&Session> = self.sessions.iter().collect();
        let messages: Vec<&Message> = self.messages.iter().collect();
        let parts: Vec<&Part> = self.parts.iter().collect();
        let mut out = Vec::with_capacity(self.len());
        for (row, context) in super::SqliteStore::rows_lossy(&sessions, &messages, &parts) {
            out.push(Batched {
                upsert: Some(row),
                context,
                done: None,
            });
        }
        out
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Batched(b) => write!(f, "Batched({})", b.context),
            Job::Many(v) => write!(f, "Many({})", v.len()),
            Job::Exclusive(_) => f.write_str("Exclusive"),
            Job::Values(v) => write!(f, "Values({})", v.len()),
        }
    }
}

/// Deletes a session's whole subtree in one transaction; descendants come first in the result.
pub(super) async fn delete_tree(
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
pub(super) async fn replace_todos(
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

/// How long the writer waits for more writes after one nobody waits for, before committing.
pub(super) const LINGER: Duration = Duration::from_millis(20);

/// The longest the writer lingers in a burst of writes nobody waits for.
pub(super) const MAX_LINGER: Duration = Duration::from_millis(250);

impl Job {
    /// Somebody waits for this job: it is committed without lingering.
    pub(super) fn urgent(&self) -> bool {
        match self {
            Job::Exclusive(_) => true,
            Job::Batched(b) => b.done.is_some(),
            Job::Many(v) => v.iter().any(|b| b.done.is_some()),
            Job::Values(_) => false,
        }
    }
}

/// Collects the burst that follows a write nobody waits for (a cancelled tree writing its end,
/// streaming text): until no write came in for [`LINGER`], [`MAX_LINGER`] has passed, or the
/// writes are asked for (a job somebody waits for, or a read: `Unflushed::hurry`). Meanwhile the
/// queue is not polled, so writes nobody waits for do not wake the writer one by one; the burst
/// is committed in few transactions, after it rather than in its middle.
async fn linger(
    jobs: &mut mpsc::UnboundedReceiver<Job>,
    buffered: &mut VecDeque<Job>,
    unflushed: &Unflushed,
) {
    let deadline = tokio::time::Instant::now() + MAX_LINGER;
    loop {
        let quiet = tokio::time::Instant::now() + LINGER;
        let hurried = tokio::select! {
            () = tokio::time::sleep_until(quiet.min(deadline)) => false,
            () = unflushed.hurried() => true,
        };
        let mut arrived = false;
        let mut urgent = false;
        while let Ok(job) = jobs.try_recv() {
            urgent |= job.urgent();
            buffered.push_back(job);
            arrived = true;
        }
        if hurried || urgent || !arrived || tokio::time::Instant::now() >= deadline {
            return;
        }
    }
}

/// The writer task: owns the write connection and commits queued upserts in batches, one
/// transaction each, answering after the commit; exclusive writes run alone, in queue order.
pub(super) async fn write_batches(
    conn: Arc<AsyncMutex<SqliteConnection>>,
    in_flight: Arc<AtomicUsize>,
    unflushed: Arc<Unflushed>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    // Jobs taken off the queue and not yet done, in queue order.
    let mut buffered: VecDeque<Job> = VecDeque::new();
    // Jobs are numbered in queue order from 1 (see `Unflushed`): this counts the ones done.
    let mut done: u64 = 0;
    loop {
        if buffered.is_empty() {
            match jobs.recv().await {
                Some(job) => {
                    let urgent = job.urgent();
                    buffered.push_back(job);
                    if !urgent {
                        linger(&mut jobs, &mut buffered, &unflushed).await;
                    }
                }
                None => break,
            }
        }
        let Some(first) = buffered.pop_front() else {
            continue;
        };
        let mut batch = match first {
            Job::Exclusive(work) => {
                work(&mut *conn.lock().await).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                done += 1;
                unflushed.committed(done, std::iter::empty());
                continue;
            }
            Job::Batched(b) => vec![b],
            Job::Many(v) => v,
            Job::Values(v) => v.into_batched(),
        };
        let mut taken: u64 = 1;
        while batch.len() < MAX_BATCH {
            let next = match buffered.pop_front() {
                Some(job) => job,
                None => match jobs.try_recv() {
                    Ok(job) => job,
                    Err(_) => break,
                },
            };
            match next {
                Job::Exclusive(work) => {
                    buffered.push_front(Job::Exclusive(work));
                    break;
                }
                Job::Batched(b) => batch.push(b),
                Job::Many(v) => batch.extend(v),
                Job::Values(v) => batch.extend(v.into_batched()),
            }
            taken += 1;
        }
        let writes = batch.len();
        // The sessions written without a waiter, to clear once committed.
        let behind: Vec<String> = batch
            .iter()
            .filter(|b| b.done.is_none())
            .filter_map(|b| b.upsert.as_ref().map(|u| u.session().to_string()))
            .collect();
        commit_batch(&mut *conn.lock().await, batch).await;
        in_flight.fetch_sub(writes, Ordering::SeqCst);
        done += taken;
        unflushed.committed(done, behind.iter().map(String::as_str));
    }
}

/// How often the write-ahead log is folded back into the database file.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Folds the write-ahead log into the database every second, off the write path, for as long
/// as the store is open. Passive checkpoints never block the writer or readers.
pub(super) async fn checkpoint(mut conn: SqliteConnection, store: mpsc::WeakUnboundedSender<Job>) {
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
pub(super) async fn commit_batch(conn: &mut SqliteConnection, batch: Vec<Batched>) {
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
pub(super) async fn apply<'a>(
    conn: &mut SqliteConnection,
    entries: impl Iterator<Item = (Option<&'a Upsert>, &'a str)>,
) -> Vec<Result<(), StoreError>> {
    let entries: Vec<(Option<&Upsert>, &str)> = entries.collect();
    let upserts: Vec<&Upsert> = entries.iter().filter_map(|(u, _)| *u).collect();
    let mut results: Vec<Result<(), StoreError>> = (0..entries.len()).map(|_| Ok(())).collect();
    let applied = match upserts.as_slice() {
        [] => Ok(()),
        // All rows in one statement: the `write_batch` trigger applies them all or none.
        rows => run_batch(conn, rows).await,
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
pub(super) fn batch_payload(upserts: &[&Upsert]) -> String {
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

/// Writes one upsert, like a batch: through the `write_batch` trigger, so that
/// there is one copy of each table's upsert SQL (in `migrations/0002_write_batch.sql`).
pub(super) async fn run_upsert(
    conn: &mut SqliteConnection,
    upsert: &Upsert,
) -> Result<(), sqlx::Error> {
    run_batch(conn, &[upsert]).await
}

/// Writes several upserts in one statement through the `write_batch` trigger.
async fn run_batch(conn: &mut SqliteConnection, upserts: &[&Upsert]) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO write_batch (payload) VALUES (?1)")
        .bind(batch_payload(upserts))
        .execute(conn)
        .await
        .map(|_| ())
}
