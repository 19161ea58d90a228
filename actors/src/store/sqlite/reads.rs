//! Reads of sessions, messages and parts, on a few read-only connections that in WAL mode
//! never wait for the writer; a message with its parts is read in one statement, so it is one
//! snapshot.

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::SqliteConnection;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::Session;
use tokio::sync::{Mutex as AsyncMutex, MutexGuard as AsyncMutexGuard};

use crate::store::{MessageWithParts, SessionFilter, StoreError};

use crate::store::rows::{assemble, database, decode_session, to_sql};

/// Read-only connections handed out round robin (cheaper than a pool's acquire and release).
#[derive(Debug)]
pub(super) struct Readers {
    conns: Vec<AsyncMutex<SqliteConnection>>,
    next: AtomicUsize,
}

impl Readers {
    /// Hands out `conns` (at least one).
    pub(super) fn new(conns: Vec<AsyncMutex<SqliteConnection>>) -> Readers {
        Readers {
            conns,
            next: AtomicUsize::new(0),
        }
    }

    /// A free connection, else the next one in turn once it is free.
    pub(super) async fn get(&self) -> AsyncMutexGuard<'_, SqliteConnection> {
        for conn in &self.conns {
            if let Ok(guard) = conn.try_lock() {
                return guard;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[i].lock().await
    }
}

/// Session `id`, if stored.
pub(super) async fn session(
    conn: &mut SqliteConnection,
    id: &SessionId,
) -> Result<Option<Session>, StoreError> {
    let row = sqlx::query("SELECT id, data, time_updated FROM session WHERE id = ?1")
        .bind(id.as_str())
        .fetch_optional(conn)
        .await
        .map_err(database(format_args!("cannot read session {id}")))?;
    row.map(|row| decode_session(&row)).transpose()
}

/// The sessions that `filter` selects, most recently updated first.
pub(super) async fn sessions(
    conn: &mut SqliteConnection,
    filter: &SessionFilter,
) -> Result<Vec<Session>, StoreError> {
    let limit = filter
        .limit
        .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    let rows = sqlx::query(
        "SELECT id, data, time_updated FROM session \
         WHERE (?1 = 0 OR parent_id IS NULL) \
           AND (?2 IS NULL OR time_updated >= ?2) \
           AND (?3 IS NULL OR instr(title_folded, ?3) > 0) \
           AND (?5 IS NULL OR project_id = ?5) \
         ORDER BY time_updated DESC, time_created DESC, id DESC \
         LIMIT ?4",
    )
    .bind(filter.roots)
    .bind(filter.start.map(to_sql))
    .bind(filter.search.as_deref().map(str::to_lowercase))
    .bind(limit)
    .bind(filter.project_id.as_deref())
    .fetch_all(conn)
    .await
    .map_err(database("cannot list sessions"))?;
    rows.iter().map(decode_session).collect()
}

/// The direct children of session `id`, oldest first.
pub(super) async fn children(
    conn: &mut SqliteConnection,
    id: &SessionId,
) -> Result<Vec<Session>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, data, time_updated FROM session WHERE parent_id = ?1 \
         ORDER BY time_created ASC, id ASC",
    )
    .bind(id.as_str())
    .fetch_all(conn)
    .await
    .map_err(database(format_args!(
        "cannot list the children of session {id}"
    )))?;
    rows.iter().map(decode_session).collect()
}

/// Message `id` of `session` with its parts, if stored.
pub(super) async fn message(
    conn: &mut SqliteConnection,
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
    .fetch_all(conn)
    .await
    .map_err(database(&context))?;
    Ok(assemble(&rows, &context)?.pop())
}

/// Every message of `session` with its parts, in the order they were created.
pub(super) async fn messages(
    conn: &mut SqliteConnection,
    session: &SessionId,
) -> Result<Vec<MessageWithParts>, StoreError> {
    let context = format!("cannot read the messages of session {session}");
    // One statement, so one snapshot and one round trip to the database thread.
    let rows = sqlx::query(
        // Messages by creation time, ties in the order they were first stored (upserts keep
        // the rowid), so that client-chosen ids of another scheme (OpenCode's) cannot reorder
        // the history; parts by id.
        "SELECT 0 AS kind, time_created AS t, rowid AS ord, id, data FROM message \
         WHERE session_id = ?1 \
         UNION ALL \
         SELECT 1 AS kind, 0 AS t, 0 AS ord, id, data FROM part WHERE session_id = ?1 \
         ORDER BY kind, t, ord, id",
    )
    .bind(session.as_str())
    .fetch_all(conn)
    .await
    .map_err(database(&context))?;
    assemble(&rows, &context)
}
