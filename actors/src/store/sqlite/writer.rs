//! The write side of the SQLite store: queued jobs, group commit, checkpoints.
//!
//! A batch of upserts is written table by table, parents first (sessions, then messages, then
//! parts, each in queue order, so that a later upsert of a row wins), in multi-row
//! `INSERT … ON CONFLICT DO UPDATE` statements of a few fixed sizes (padded with NULL rows,
//! which they skip) binding the rows' values as they are; in one transaction when it takes more
//! than one statement. Messages and parts are updated in place, as if they kept their parents;
//! a row that moves fails its statement, which runs again taking every column. When the batch
//! fails, its rows are written one by one in the same order, so that only the faulty ones
//! report an error.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, Connection, Row, SqliteConnection};
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
        /// The title case-folded, for the `title_folded` column.
        folded: String,
        created: i64,
        updated: i64,
        data: String,
    },
    Message {
        id: String,
        session: String,
        created: i64,
        /// The runtime writing the message while it is an unfinished answer, else `None`.
        owner: Option<Arc<str>>,
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

    /// What was being done, to prefix an error of this row with.
    pub(super) fn context(&self) -> String {
        match self {
            Upsert::Session { id, .. } => format!("cannot store session {id}"),
            Upsert::Message { id, session, .. } => {
                format!("cannot store message {id} of session {session}")
            }
            Upsert::Part { id, message, .. } => {
                format!("cannot store part {id} of message {message}")
            }
        }
    }

    /// The table the row goes to.
    fn table(&self) -> Table {
        match self {
            Upsert::Session { .. } => Table::Session,
            Upsert::Message { .. } => Table::Message,
            Upsert::Part { .. } => Table::Part,
        }
    }

    /// Appends the row's values to `args`, in the column order of its table's statement.
    fn bind<'q>(&'q self, args: &mut SqliteArguments<'q>) -> Result<(), sqlx::Error> {
        let encode = sqlx::Error::Encode;
        match self {
            Upsert::Session {
                id,
                parent,
                project,
                title,
                folded,
                created,
                updated,
                data,
            } => {
                args.add(id.as_str()).map_err(encode)?;
                args.add(parent.as_deref()).map_err(encode)?;
                args.add(project.as_str()).map_err(encode)?;
                args.add(title.as_str()).map_err(encode)?;
                args.add(folded.as_str()).map_err(encode)?;
                args.add(*created).map_err(encode)?;
                args.add(*updated).map_err(encode)?;
                args.add(data.as_str()).map_err(encode)?;
            }
            Upsert::Message {
                id,
                session,
                created,
                owner,
                data,
            } => {
                args.add(id.as_str()).map_err(encode)?;
                args.add(session.as_str()).map_err(encode)?;
                args.add(*created).map_err(encode)?;
                args.add(owner.as_deref()).map_err(encode)?;
                args.add(data.as_str()).map_err(encode)?;
            }
            Upsert::Part {
                id,
                message,
                session,
                data,
            } => {
                args.add(id.as_str()).map_err(encode)?;
                args.add(message.as_str()).map_err(encode)?;
                args.add(session.as_str()).map_err(encode)?;
                args.add(data.as_str()).map_err(encode)?;
            }
        }
        Ok(())
    }

    /// A [`StoreError`] for this row failing with `error`.
    pub(super) fn failed(&self, error: sqlx::Error) -> StoreError {
        database(self.context())(error)
    }
}

/// The tables that upserts write, in the order a batch applies them (parents first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Session,
    Message,
    Part,
}

impl Table {
    /// Every table, in the order of application.
    const ALL: [Table; 3] = [Table::Session, Table::Message, Table::Part];

    /// The statement's head, up to the row tuples: rows whose id is NULL are padding.
    fn insert(self) -> &'static str {
        match self {
            Table::Session => {
                "INSERT INTO session (id, parent_id, project_id, title, title_folded, \
                 time_created, time_updated, data) \
                 SELECT column1, column2, column3, column4, column5, column6, column7, column8 \
                 FROM (VALUES "
            }
            Table::Message => {
                "INSERT INTO message (id, session_id, time_created, owner, data) \
                 SELECT column1, column2, column3, column4, column5 FROM (VALUES "
            }
            Table::Part => {
                "INSERT INTO part (id, message_id, session_id, data) \
                 SELECT column1, column2, column3, column4 FROM (VALUES "
            }
        }
    }

    /// How many values a row binds.
    fn columns(self) -> usize {
        match self {
            Table::Session => 8,
            Table::Message => 5,
            Table::Part => 4,
        }
    }

    /// One row's placeholders.
    fn row(self) -> &'static str {
        match self {
            Table::Session => "(?,?,?,?,?,?,?,?)",
            Table::Message => "(?,?,?,?,?)",
            Table::Part => "(?,?,?,?)",
        }
    }

    /// The statement's tail: padding is skipped, and a row that exists already takes the new
    /// values. `InPlace` assumes the row keeps its parents (so that SQLite need not touch
    /// their indexes nor check their foreign keys) and fails the statement, by a NULL in a
    /// `NOT NULL` column, for a row that does not; `Full` takes every column.
    fn conflict(self, update: Update) -> &'static str {
        match (self, update) {
            (Table::Session, _) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 parent_id = excluded.parent_id, project_id = excluded.project_id, \
                 title = excluded.title, title_folded = excluded.title_folded, \
                 time_created = excluded.time_created, time_updated = excluded.time_updated, \
                 data = excluded.data"
            }
            (Table::Message, Update::InPlace) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 time_created = excluded.time_created, owner = excluded.owner, \
                 data = iif(session_id IS excluded.session_id, excluded.data, NULL)"
            }
            (Table::Message, Update::Full) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 session_id = excluded.session_id, time_created = excluded.time_created, \
                 owner = excluded.owner, data = excluded.data"
            }
            (Table::Part, Update::InPlace) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 data = iif(message_id IS excluded.message_id \
                            AND session_id IS excluded.session_id, excluded.data, NULL)"
            }
            (Table::Part, Update::Full) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 message_id = excluded.message_id, session_id = excluded.session_id, \
                 data = excluded.data"
            }
        }
    }

    /// The upsert of as many rows as `CHUNKS[chunk]`, built once.
    fn sql(self, update: Update, chunk: usize) -> &'static str {
        static SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
            let mut all = Vec::new();
            for table in Table::ALL {
                for update in [Update::InPlace, Update::Full] {
                    for rows in CHUNKS {
                        let mut sql = String::from(table.insert());
                        for i in 0..rows {
                            if i > 0 {
                                sql.push(',');
                            }
                            sql.push_str(table.row());
                        }
                        sql.push_str(table.conflict(update));
                        all.push(sql);
                    }
                }
            }
            all
        });
        &SQL[(self as usize * 2 + update as usize) * CHUNKS.len() + chunk]
    }
}

/// How an upsert's statement updates a row that exists already (see [`Table::conflict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Update {
    InPlace,
    Full,
}

/// The row counts of the multi-row upserts: a batch goes in statements of the largest, and
/// the rest in the smallest that holds it, padded; so each table has a handful of statements
/// to cache, not one per count, and a batch of up to 256 rows per table one statement each.
const CHUNKS: [usize; 5] = [1, 4, 16, 64, 256];

/// How `rows` rows are cut into statements: for each, how many rows it takes and its index in
/// [`CHUNKS`].
fn chunks(mut rows: usize) -> impl Iterator<Item = (usize, usize)> {
    std::iter::from_fn(move || {
        if rows == 0 {
            return None;
        }
        let chunk = CHUNKS
            .iter()
            .position(|&c| c >= rows)
            .unwrap_or(CHUNKS.len() - 1);
        let taken = rows.min(CHUNKS[chunk]);
        rows -= taken;
        Some((taken, chunk))
    })
}

/// An upsert (or, without one, a barrier) committed with its batch; `done` hears of it.
#[derive(Debug)]
pub(super) struct Batched {
    pub upsert: Option<Upsert>,
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
    pub messages: Vec<Arc<Message>>,
    pub parts: Vec<Arc<Part>>,
    /// The runtime writing through the store, when named (see `SqliteStore::set_runtime`).
    pub runtime: Option<Arc<str>>,
}

impl Values {
    /// How many rows they make.
    pub fn len(&self) -> usize {
        self.sessions.len() + self.messages.len() + self.parts.len()
    }

    /// Their rows, ready to commit; a value that cannot be encoded is logged and left out.
    fn into_batched(self) -> Vec<Batched> {
        let runtime = self.runtime.as_ref();
        super::SqliteStore::rows_lossy(&self.sessions, &self.messages, &self.parts, runtime)
            .into_iter()
            .map(|row| Batched {
                upsert: Some(row),
                done: None,
            })
            .collect()
    }
}

/// Why a job was refused: the writer task is gone.
const CLOSED: &str = "the store is closed";

impl Job {
    /// The error for this job refused by a closed store.
    pub(super) fn closed(self) -> StoreError {
        match self {
            Job::Batched(Batched {
                upsert: Some(upsert),
                ..
            }) => StoreError::Database(format!("{}: {CLOSED}", upsert.context())),
            _ => StoreError::Database(CLOSED.into()),
        }
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Batched(Batched { upsert: None, .. }) => f.write_str("Batched(barrier)"),
            Job::Batched(Batched {
                upsert: Some(u), ..
            }) => write!(f, "Batched({:?} of session {})", u.table(), u.session()),
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
        let results = {
            let mut conn = conn.lock().await;
            apply(&mut conn, batch.iter().map(|b| b.upsert.as_ref())).await
        };
        in_flight.fetch_sub(writes, Ordering::SeqCst);
        done += taken;
        // The sessions written without a waiter are clear once committed.
        let mut last = None;
        let behind = batch
            .iter()
            .filter(|b| b.done.is_none())
            .filter_map(|b| b.upsert.as_ref().map(Upsert::session))
            // Rows of a session come in runs: look each run up once.
            .filter(|&session| last.replace(session) != Some(session));
        unflushed.committed(done, behind);
        answer(batch, results);
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

/// Tells each upsert's waiter how it went; failures nobody waits for are logged.
fn answer(batch: Vec<Batched>, results: Vec<Result<(), StoreError>>) {
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

/// Writes upserts (`None` entries are barriers) all together, all or nothing; when that fails,
/// one by one, so that only the rows at fault report an error. Returns one result per entry.
pub(super) async fn apply<'a>(
    conn: &mut SqliteConnection,
    entries: impl Iterator<Item = Option<&'a Upsert>>,
) -> Vec<Result<(), StoreError>> {
    let entries: Vec<Option<&Upsert>> = entries.collect();
    let mut results: Vec<Result<(), StoreError>> = (0..entries.len()).map(|_| Ok(())).collect();
    let upserts: Vec<&Upsert> = entries.iter().flatten().copied().collect();
    let Err(error) = run_batch(conn, &upserts).await else {
        return results;
    };
    if let [upsert] = upserts.as_slice() {
        if let Some(i) = entries.iter().position(Option::is_some) {
            results[i] = Err(upsert.failed(error));
        }
        return results;
    }
    // In the batch's order of application, so that a row whose parent is in the batch still
    // finds it.
    for table in Table::ALL {
        for (i, entry) in entries.iter().enumerate() {
            if let Some(upsert) = entry
                && upsert.table() == table
            {
                results[i] = run_upsert(conn, upsert).await.map_err(|e| upsert.failed(e));
            }
        }
    }
    results
}

/// Writes one upsert in a statement of its own.
pub(super) async fn run_upsert(
    conn: &mut SqliteConnection,
    upsert: &Upsert,
) -> Result<(), sqlx::Error> {
    run_chunk(conn, upsert.table(), &[upsert], 0).await
}

/// Writes upserts all or none: per table (sessions, then messages, then parts), in multi-row
/// statements of the [`CHUNKS`] sizes, inside one transaction unless one statement does it.
async fn run_batch(conn: &mut SqliteConnection, upserts: &[&Upsert]) -> Result<(), sqlx::Error> {
    let mut tables: [Vec<&Upsert>; 3] = Default::default();
    for upsert in upserts {
        tables[upsert.table() as usize].push(upsert);
    }
    let statements: usize = tables.iter().map(|rows| chunks(rows.len()).count()).sum();
    if statements <= 1 {
        for (table, rows) in Table::ALL.into_iter().zip(&tables) {
            for (_, chunk) in chunks(rows.len()) {
                run_chunk(conn, table, rows, chunk).await?;
            }
        }
        return Ok(());
    }
    let mut tx = conn.begin().await?;
    for (table, rows) in Table::ALL.into_iter().zip(&tables) {
        let mut rest = rows.as_slice();
        for (taken, chunk) in chunks(rows.len()) {
            let (head, tail) = rest.split_at(taken);
            if let Err(error) = run_chunk(&mut tx, table, head, chunk).await {
                let _ = tx.rollback().await;
                return Err(error);
            }
            rest = tail;
        }
    }
    tx.commit().await
}

/// Writes the rows of one table in one statement of `CHUNKS[chunk]` rows (at least as many as
/// there are rows): in place; should that fail, for a row that moves to other parents (or a
/// real fault, which fails again), again taking every column. A failed statement is undone
/// whole, so the second one starts from where the first did.
async fn run_chunk(
    conn: &mut SqliteConnection,
    table: Table,
    rows: &[&Upsert],
    chunk: usize,
) -> Result<(), sqlx::Error> {
    match execute(conn, table, Update::InPlace, rows, chunk).await {
        Err(_) if table != Table::Session => execute(conn, table, Update::Full, rows, chunk).await,
        result => result,
    }
}

/// Runs the upsert statement of `CHUNKS[chunk]` rows for `rows` of `table`, padded with NULL
/// rows.
async fn execute(
    conn: &mut SqliteConnection,
    table: Table,
    update: Update,
    rows: &[&Upsert],
    chunk: usize,
) -> Result<(), sqlx::Error> {
    let (columns, size) = (table.columns(), CHUNKS[chunk]);
    let mut args = SqliteArguments::default();
    args.reserve(size * columns, 0);
    for row in rows {
        row.bind(&mut args)?;
    }
    for _ in rows.len() * columns..size * columns {
        args.add(None::<&str>).map_err(sqlx::Error::Encode)?;
    }
    sqlx::query_with(table.sql(update, chunk), args)
        .execute(conn)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::str::FromStr;

    use sqlx::ConnectOptions;
    use sqlx::sqlite::SqliteConnectOptions;
    use taskforce_agents::id::MessageId;
    use taskforce_agents::model::{
        AssistantMessage, Message, MessagePath, ModelRef, Part, PartKind, TextPart, UserMessage,
    };

    use super::super::{MIGRATOR, SqliteStore};
    use super::*;

    /// A fresh in-memory database with the store's schema and foreign keys on.
    async fn db() -> SqliteConnection {
        let mut conn = SqliteConnectOptions::from_str("sqlite::memory:")
            .unwrap()
            .foreign_keys(true)
            .connect()
            .await
            .unwrap();
        MIGRATOR.run(&mut conn).await.unwrap();
        conn
    }

    fn session(title: &str) -> Upsert {
        SqliteStore::session_upsert(&Session::new("proj", "/srv/p", title, 1_000)).unwrap()
    }

    fn message(session: &str) -> Upsert {
        let session = SessionId::from_str(session).unwrap();
        let user: Message =
            UserMessage::new(session, "build", ModelRef::new("scripted", "echo"), 1_001).into();
        SqliteStore::message_upsert(&user, None).unwrap()
    }

    fn reply(session: &str, parent: &str) -> Upsert {
        let path = MessagePath {
            cwd: PathBuf::from("/srv/p"),
            root: PathBuf::from("/srv/p"),
        };
        let assistant: Message = AssistantMessage::new(
            SessionId::from_str(session).unwrap(),
            MessageId::from_str(parent).unwrap(),
            "build",
            &ModelRef::new("scripted", "echo"),
            path,
            1_002,
        )
        .into();
        SqliteStore::message_upsert(&assistant, None).unwrap()
    }

    fn part(session: &str, message: &str, text: &str) -> Part {
        Part::new(
            SessionId::from_str(session).unwrap(),
            MessageId::from_str(message).unwrap(),
            TextPart::new(text),
        )
    }

    fn upsert(part: &Part) -> Upsert {
        SqliteStore::part_upsert(part).unwrap()
    }

    fn id(upsert: &Upsert) -> &str {
        match upsert {
            Upsert::Session { id, .. } | Upsert::Message { id, .. } | Upsert::Part { id, .. } => id,
        }
    }

    /// The rows of `table` as (id, parent columns, data), ordered by id.
    async fn rows(conn: &mut SqliteConnection, table: &str) -> Vec<(String, String, String)> {
        let parents = match table {
            "session" => "coalesce(parent_id, '') || '/' || title_folded",
            "message" => "session_id",
            _ => "message_id || '/' || session_id",
        };
        sqlx::query_as(&format!(
            "SELECT id, {parents}, data FROM {table} ORDER BY id"
        ))
        .fetch_all(conn)
        .await
        .unwrap()
    }

    /// The text of a stored text part.
    fn text(data: &str) -> String {
        let part: Part = serde_json::from_str(data).unwrap();
        match part.kind {
            PartKind::Text(t) => t.text,
            other => panic!("not a text part: {other:?}"),
        }
    }

    #[test]
    fn chunks_cover_the_rows_with_few_statements() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(1).collect::<Vec<_>>(), vec![(1, 0)]);
        assert_eq!(chunks(5).collect::<Vec<_>>(), vec![(5, 2)]);
        assert_eq!(chunks(64).collect::<Vec<_>>(), vec![(64, 3)]);
        assert_eq!(chunks(300).collect::<Vec<_>>(), vec![(256, 4), (44, 3)]);
        for rows in 0..=MAX_BATCH {
            let cut: Vec<(usize, usize)> = chunks(rows).collect();
            assert_eq!(cut.iter().map(|(n, _)| n).sum::<usize>(), rows, "{rows}");
            assert!(cut.iter().all(|&(n, c)| 0 < n && n <= CHUNKS[c]), "{rows}");
            assert!(cut.len() <= rows.div_ceil(256), "{rows}");
        }
    }

    #[test]
    fn every_statement_binds_as_many_values_as_it_has_placeholders() {
        for table in Table::ALL {
            for update in [Update::InPlace, Update::Full] {
                for (chunk, rows) in CHUNKS.iter().enumerate() {
                    let sql = table.sql(update, chunk);
                    assert_eq!(sql.matches('?').count(), rows * table.columns(), "{sql}");
                }
            }
        }
    }

    #[tokio::test]
    async fn a_batch_applies_parents_first_and_a_faulty_row_fails_alone() {
        let mut conn = db().await;
        let (s1, s2) = (session("First"), session("Second"));
        let (m1, m2) = (message(id(&s1)), message(id(&s2)));
        let p1 = upsert(&part(id(&s1), id(&m1), "one"));
        let p2 = upsert(&part(id(&s2), id(&m2), "two"));
        let orphan = upsert(&part(id(&s1), MessageId::new().as_str(), "orphan"));
        let ghost = message(SessionId::new().as_str());
        let mut renamed = Session::new("proj", "/srv/p", "Renamed ÉTÉ", 2_000);
        renamed.id = SessionId::from_str(id(&s1)).unwrap();
        let renamed = SqliteStore::session_upsert(&renamed).unwrap();
        // Children before their parents, faulty rows in the middle, a barrier, a rename last.
        let batch = [
            Some(&p1),
            Some(&m1),
            Some(&s1),
            None,
            Some(&orphan),
            Some(&s2),
            Some(&ghost),
            Some(&m2),
            Some(&p2),
            Some(&renamed),
        ];
        let results = apply(&mut conn, batch.into_iter()).await;
        let failed: Vec<usize> = (0..results.len())
            .filter(|&i| results[i].is_err())
            .collect();
        assert_eq!(failed, vec![4, 6], "{results:?}");
        for (i, faulty) in [(4, &orphan), (6, &ghost)] {
            let Err(StoreError::Database(error)) = &results[i] else {
                panic!("{:?}", results[i]);
            };
            assert!(error.contains(id(faulty)), "{error}");
            assert!(error.contains("FOREIGN KEY"), "{error}");
        }

        let sessions = rows(&mut conn, "session").await;
        assert_eq!(sessions.len(), 2);
        let first = sessions.iter().find(|s| s.0 == id(&s1)).unwrap();
        assert_eq!(
            first.1, "/renamed été",
            "the last upsert wins, title folded"
        );
        let messages = rows(&mut conn, "message").await;
        assert_eq!(messages.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), {
            let mut ids = vec![id(&m1), id(&m2)];
            ids.sort();
            ids
        });
        let parts = rows(&mut conn, "part").await;
        let mut expected = vec![id(&p1), id(&p2)];
        expected.sort();
        assert_eq!(
            parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
            expected
        );
    }

    #[tokio::test]
    async fn a_batch_bigger_than_a_statement_keeps_the_last_upsert_of_each_row() {
        let mut conn = db().await;
        let s = session("big");
        let m = message(id(&s));
        let mut parts: Vec<Part> = (0..60)
            .map(|i| part(id(&s), id(&m), &format!("{i}")))
            .collect();
        let mut batch = vec![s, m];
        // Every part 6 times, round robin, so that each appears in several statements and
        // several times in one.
        for round in 0..6 {
            for (i, p) in parts.iter_mut().enumerate() {
                if let PartKind::Text(t) = &mut p.kind {
                    t.text = format!("part {i} round {round}");
                }
                batch.push(upsert(p));
            }
        }
        // And the messages of other sessions, more than a statement holds.
        for i in 0..300 {
            let other = session(&format!("other {i}"));
            batch.push(message(id(&other)));
            batch.push(other);
        }
        assert!(batch.len() <= MAX_BATCH);
        let results = apply(&mut conn, batch.iter().map(Some)).await;
        assert!(results.iter().all(Result::is_ok));

        let stored = rows(&mut conn, "part").await;
        assert_eq!(stored.len(), 60);
        for (i, p) in parts.iter().enumerate() {
            let row = stored.iter().find(|r| r.0 == p.id.as_str()).unwrap();
            assert_eq!(text(&row.2), format!("part {i} round 5"));
        }
        assert_eq!(rows(&mut conn, "message").await.len(), 301);
        assert_eq!(rows(&mut conn, "session").await.len(), 301);
    }

    #[tokio::test]
    async fn a_row_may_move_to_other_parents() {
        let mut conn = db().await;
        let (s1, s2) = (session("one"), session("two"));
        let (m1, m2) = (message(id(&s1)), message(id(&s2)));
        let mut moving = part(id(&s1), id(&m1), "before");
        let stays = part(id(&s1), id(&m1), "stays");
        let batch = [&s1, &s2, &m1, &m2, &upsert(&moving), &upsert(&stays)];
        assert!(
            apply(&mut conn, batch.into_iter().map(Some))
                .await
                .iter()
                .all(Result::is_ok)
        );

        // In a batch of one statement, then alone: the part moves to m2, the message to s2.
        moving.message_id = MessageId::from_str(id(&m2)).unwrap();
        moving.session_id = SessionId::from_str(id(&s2)).unwrap();
        if let PartKind::Text(t) = &mut moving.kind {
            t.text = "after".into();
        }
        let batch = [upsert(&moving), upsert(&stays)];
        assert!(
            apply(&mut conn, batch.iter().map(Some))
                .await
                .iter()
                .all(Result::is_ok)
        );
        let reply = reply(id(&s1), id(&m1));
        assert!(run_upsert(&mut conn, &reply).await.is_ok());
        let Upsert::Message {
            id: reply_id,
            data,
            owner,
            ..
        } = &reply
        else {
            unreachable!()
        };
        let moved = Upsert::Message {
            id: reply_id.clone(),
            session: id(&s2).to_string(),
            created: 1_002,
            owner: owner.clone(),
            data: data.replace(id(&s1), id(&s2)),
        };
        assert!(run_upsert(&mut conn, &moved).await.is_ok());

        let parts = rows(&mut conn, "part").await;
        let row = parts.iter().find(|r| r.0 == moving.id.as_str()).unwrap();
        assert_eq!(row.1, format!("{}/{}", id(&m2), id(&s2)));
        assert_eq!(text(&row.2), "after");
        let row = parts.iter().find(|r| r.0 == stays.id.as_str()).unwrap();
        assert_eq!(row.1, format!("{}/{}", id(&m1), id(&s1)));
        let messages = rows(&mut conn, "message").await;
        let row = messages.iter().find(|r| &r.0 == reply_id).unwrap();
        assert_eq!(&row.1, id(&s2));

        // A move to a parent that does not exist fails, and leaves the row as it was.
        let mut lost = moving.clone();
        lost.message_id = MessageId::new();
        let results = apply(&mut conn, [Some(&upsert(&lost))].into_iter()).await;
        assert!(results[0].is_err());
        let parts = rows(&mut conn, "part").await;
        let row = parts.iter().find(|r| r.0 == moving.id.as_str()).unwrap();
        assert_eq!(text(&row.2), "after");
    }

    #[tokio::test]
    async fn barriers_alone_write_nothing() {
        let mut conn = db().await;
        let results = apply(&mut conn, [None, None].into_iter()).await;
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(Result::is_ok));
    }
}
