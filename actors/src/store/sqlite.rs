//! [`SqliteStore`]: the embedded [`Store`] — one SQLite file, WAL, one writer, a few readers.
//!
//! Every row keeps its domain value as serde JSON in `data` (OpenCode's shapes survive as they
//! are); the other columns copy the fields that queries filter and order on. Writes go through a
//! pool of exactly one connection, so they are serialized in-process and never fight over the
//! SQLite write lock; reads use a small pool of `query_only` connections and, in WAL mode, never
//! wait for the writer. Reads that touch two tables run in one read transaction so they see one
//! snapshot.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};

use super::{MessageWithParts, SessionFilter, Store, StoreError};

/// The schema migrations in `actors/migrations`, embedded at compile time.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many read connections the store keeps at most.
const READERS: u32 = 4;

/// How deep `delete_session` follows parent links; only a corrupt cycle gets near it.
const MAX_TREE_DEPTH: i64 = 4096;

/// The [`Store`] backed by the SQLite file `taskforce.db` in the data directory.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The database file.
    path: PathBuf,
    /// The single write connection.
    writer: SqlitePool,
    /// The read-only connections.
    reader: SqlitePool,
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
            .optimize_on_close(true, None);
        // Kept open for the store's whole life: the WAL and its index stay in place for readers.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(writer_options)
            .await
            .map_err(|e| open_error(format!("cannot open the database: {e}")))?;

        MIGRATOR
            .run(&writer)
            .await
            .map_err(|e| open_error(format!("cannot apply the migrations: {e}")))?;

        let reader = SqlitePoolOptions::new()
            .max_connections(READERS)
            .connect_with(base.pragma("query_only", "ON"))
            .await
            .map_err(|e| open_error(format!("cannot open read connections: {e}")))?;

        tracing::debug!(path = %path.display(), "opened the store");
        Ok(SqliteStore {
            path,
            writer,
            reader,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes every connection, waiting for them to finish; later calls fail.
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Starts a write transaction on the writer connection.
    async fn write(
        &self,
        context: impl Display,
    ) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.writer.begin().await.map_err(database(context))
    }

    /// Starts a read transaction: every query in it sees the same snapshot.
    async fn read(
        &self,
        context: impl Display,
    ) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.reader.begin().await.map_err(database(context))
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        let id = session.id.as_str();
        let context = format!("cannot store session {id}");
        let data = encode("session", id, session)?;
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
        .bind(session.parent_id.as_ref().map(SessionId::as_str))
        .bind(&session.project_id)
        .bind(&session.title)
        .bind(session.title.to_lowercase())
        .bind(to_sql(session.time.created))
        .bind(to_sql(session.time.updated))
        .bind(data)
        .execute(&self.writer)
        .await
        .map_err(database(context))?;
        Ok(())
    }

    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        let row = sqlx::query("SELECT id, data FROM session WHERE id = ?1")
            .bind(id.as_str())
            .fetch_optional(&self.reader)
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
        .fetch_all(&self.reader)
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
        .fetch_all(&self.reader)
        .await
        .map_err(database(format_args!(
            "cannot list the children of session {id}"
        )))?;
        rows.iter().map(decode_session).collect()
    }

    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        let context = format!("cannot delete session {id}");
        let mut tx = self.write(&context).await?;
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
        let ids = serde_json::to_string(&ids)
            .map_err(|e| StoreError::Database(format!("{context}: {e}")))?;
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

    async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        let id = message.id().as_str();
        let session = message.session_id();
        let context = format!("cannot store message {id} of session {session}");
        let data = encode("message", id, message)?;
        // An upsert, not `INSERT OR REPLACE`: replacing would delete the message's parts.
        sqlx::query(
            "INSERT INTO message (id, session_id, time_created, data) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, \
               time_created = excluded.time_created, data = excluded.data",
        )
        .bind(id)
        .bind(session.as_str())
        .bind(to_sql(message.created()))
        .bind(data)
        .execute(&self.writer)
        .await
        .map_err(database(context))?;
        Ok(())
    }

    async fn message(
        &self,
        session: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        let context = format!("cannot read message {id} of session {session}");
        let mut tx = self.read(&context).await?;
        let row = sqlx::query("SELECT id, data FROM message WHERE id = ?1 AND session_id = ?2")
            .bind(id.as_str())
            .bind(session.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(database(&context))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let info = decode_message(&row)?;
        let parts = sqlx::query("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id")
            .bind(id.as_str())
            .fetch_all(&mut *tx)
            .await
            .map_err(database(&context))?;
        tx.commit().await.map_err(database(&context))?;
        let parts = parts.iter().map(decode_part).collect::<Result<_, _>>()?;
        Ok(Some(MessageWithParts { info, parts }))
    }

    async fn messages(&self, session: &SessionId) -> Result<Vec<MessageWithParts>, StoreError> {
        let context = format!("cannot read the messages of session {session}");
        let mut tx = self.read(&context).await?;
        let messages =
            sqlx::query("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY id")
                .bind(session.as_str())
                .fetch_all(&mut *tx)
                .await
                .map_err(database(&context))?;
        let parts = sqlx::query(
            "SELECT p.id AS id, p.data AS data FROM part p \
             JOIN message m ON m.id = p.message_id \
             WHERE m.session_id = ?1 \
             ORDER BY p.message_id, p.id",
        )
        .bind(session.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(database(&context))?;
        tx.commit().await.map_err(database(&context))?;

        let mut by_message: HashMap<MessageId, Vec<Part>> = HashMap::new();
        for row in &parts {
            let part = decode_part(row)?;
            by_message
                .entry(part.message_id.clone())
                .or_default()
                .push(part);
        }
        messages
            .iter()
            .map(|row| {
                let info = decode_message(row)?;
                let parts = by_message.remove(info.id()).unwrap_or_default();
                Ok(MessageWithParts { info, parts })
            })
            .collect()
    }

    async fn remove_message(&self, session: &SessionId, id: &MessageId) -> Result<(), StoreError> {
        // Its parts go with it through `ON DELETE CASCADE`.
        sqlx::query("DELETE FROM message WHERE id = ?1 AND session_id = ?2")
            .bind(id.as_str())
            .bind(session.as_str())
            .execute(&self.writer)
            .await
            .map_err(database(format_args!(
                "cannot delete message {id} of session {session}"
            )))?;
        Ok(())
    }

    async fn put_part(&self, part: &Part) -> Result<(), StoreError> {
        let id = part.id.as_str();
        let context = format!("cannot store part {id} of message {}", part.message_id);
        let data = encode("part", id, part)?;
        sqlx::query(
            "INSERT INTO part (id, message_id, session_id, data) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id, \
               session_id = excluded.session_id, data = excluded.data",
        )
        .bind(id)
        .bind(part.message_id.as_str())
        .bind(part.session_id.as_str())
        .bind(data)
        .execute(&self.writer)
        .await
        .map_err(database(context))?;
        Ok(())
    }

    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM part WHERE id = ?1")
            .bind(id.as_str())
            .execute(&self.writer)
            .await
            .map_err(database(format_args!("cannot delete part {id}")))?;
        Ok(())
    }

    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, StoreError> {
        let rows =
            sqlx::query("SELECT position, data FROM todo WHERE session_id = ?1 ORDER BY position")
                .bind(session.as_str())
                .fetch_all(&self.reader)
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
        let mut tx = self.write(&context).await?;
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
