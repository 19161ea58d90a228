//! Rows of the SQL stores: encoding and decoding the JSON payloads, error mapping. Both
//! backends keep the same columns under the same names, so a row of either decodes here.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};

use crate::store::{Approval, BackgroundTask, MessageWithParts, StoreError, Unfinished};

/// A row of either backend: its text and integer columns by name.
pub(crate) trait TextRow {
    /// The text column `column`.
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    /// The integer column `column`.
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
}

impl TextRow for SqliteRow {
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.try_get(column)
    }
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.try_get(column)
    }
}

impl TextRow for PgRow {
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.try_get(column)
    }
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.try_get(column)
    }
}

/// Messages (kind 0) and parts (kind 1), each ordered by id, put together; parts of messages
/// that are not in the rows are dropped.
pub(crate) fn assemble(
    rows: &[impl TextRow],
    context: &str,
) -> Result<Vec<MessageWithParts>, StoreError> {
    let mut messages: Vec<MessageWithParts> = Vec::new();
    let mut index: HashMap<MessageId, usize, foldhash::fast::RandomState> = HashMap::default();
    for row in rows {
        let kind = row.int("kind").map_err(database(context))?;
        if kind == 0 {
            let info = decode_message(row)?;
            index.insert(info.id().clone(), messages.len());
            messages.push(MessageWithParts {
                info: Arc::new(info),
                parts: Vec::new(),
            });
        } else {
            let part = decode_part(row)?;
            if let Some(&i) = index.get(&part.message_id) {
                messages[i].parts.push(Arc::new(part));
            }
        }
    }
    Ok(messages)
}

/// Maps a database error to [`StoreError::Database`], prefixed by what was being done.
pub(crate) fn database(context: impl Display) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| StoreError::Database(format!("{context}: {error}"))
}

/// A [`StoreError::Corrupt`] for the row `id` of `what`.
pub(crate) fn corrupt(what: &'static str, id: &str, message: impl Display) -> StoreError {
    StoreError::Corrupt {
        what,
        id: id.to_string(),
        message: message.to_string(),
    }
}

/// An epoch-milliseconds time as an SQL integer (saturating far beyond any real date).
pub(crate) fn to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The JSON payload of a domain value.
pub(crate) fn encode<T: Serialize>(what: &str, id: &str, value: &T) -> Result<String, StoreError> {
    let failed =
        |e: &dyn std::fmt::Display| StoreError::Database(format!("cannot encode {what} {id}: {e}"));
    // Room for a usual row from the start, instead of growing from a few bytes four times.
    let mut json = Vec::with_capacity(ENCODED_ROOM);
    serde_json::to_writer(&mut json, value).map_err(|e| failed(&e))?;
    String::from_utf8(json).map_err(|e| failed(&e))
}

/// The room a row's JSON starts with: a part's or a message's fits in it.
const ENCODED_ROOM: usize = 1024;

/// The `id` and `data` columns of a row, decoded as `T`; the payload must carry the row's id.
pub(crate) fn decode_row<T: DeserializeOwned>(
    row: &impl TextRow,
    what: &'static str,
    payload_id: impl Fn(&T) -> &str,
) -> Result<T, StoreError> {
    let (id, data) = id_and_data(row, what)?;
    decode_payload(&id, &data, what, payload_id)
}

/// The `id` and `data` columns of a row of `what`.
fn id_and_data(row: &impl TextRow, what: &'static str) -> Result<(String, String), StoreError> {
    let id = row.text("id").map_err(|e| corrupt(what, "(unknown)", e))?;
    let data = row.text("data").map_err(|e| corrupt(what, &id, e))?;
    Ok((id, data))
}

/// The payload `data` of row `id`, decoded as `T`; it must carry the row's id.
fn decode_payload<T: DeserializeOwned>(
    id: &str,
    data: &str,
    what: &'static str,
    payload_id: impl Fn(&T) -> &str,
) -> Result<T, StoreError> {
    let value: T = serde_json::from_str(data).map_err(|e| corrupt(what, id, e))?;
    let inner = payload_id(&value);
    if inner != id {
        return Err(corrupt(
            what,
            id,
            format_args!("the payload is {what} {inner}"),
        ));
    }
    Ok(value)
}

/// The ids of the sessions in `rows` (`id`, `data`) about to be deleted, and those of them that
/// decode; an unreadable session is deleted all the same (deleting is how it gets cleaned up),
/// and only logged.
pub(crate) fn doomed(
    rows: &[impl TextRow],
    context: &str,
) -> Result<(Vec<String>, Vec<Session>), StoreError> {
    let mut ids = Vec::with_capacity(rows.len());
    let mut deleted = Vec::with_capacity(rows.len());
    for row in rows {
        ids.push(row.text("id").map_err(database(context))?);
        match decode_session(row) {
            Ok(session) => deleted.push(session),
            Err(error) => tracing::warn!(%error, "deleting an unreadable session"),
        }
    }
    Ok((ids, deleted))
}

/// A session row (`id`, `data` and `time_updated`). The column holds the session's
/// `time.updated`: touches move it without rewriting the payload, whose copy of the time may
/// be older.
pub(crate) fn decode_session(row: &impl TextRow) -> Result<Session, StoreError> {
    let session = decode_row(row, "session", |s: &Session| s.id.as_str())?;
    with_stored_time(row, session)
}

/// Like [`decode_session`], for a row this process has just written (a touch reading back the
/// sessions it moved): when its payload is the JSON a session was written as, that session is
/// taken as it is instead of being decoded again (see `written.rs`).
pub(crate) fn read_back_session(row: &impl TextRow) -> Result<Session, StoreError> {
    let (id, data) = id_and_data(row, "session")?;
    let session = match super::written::read_back(&id, &data) {
        Some(session) => session,
        None => decode_payload(&id, &data, "session", |s: &Session| s.id.as_str())?,
    };
    with_stored_time(row, session)
}

/// `session` with the `time.updated` of its row's `time_updated` column.
fn with_stored_time(row: &impl TextRow, mut session: Session) -> Result<Session, StoreError> {
    let updated = row
        .int("time_updated")
        .map_err(|e| corrupt("session", session.id.as_str(), e))?;
    session.time.updated = u64::try_from(updated).unwrap_or(0);
    Ok(session)
}

/// A message row.
pub(crate) fn decode_message(row: &impl TextRow) -> Result<Message, StoreError> {
    decode_row(row, "message", |m: &Message| m.id().as_str())
}

/// A part row.
pub(crate) fn decode_part(row: &impl TextRow) -> Result<Part, StoreError> {
    decode_row(row, "part", |p: &Part| p.id.as_str())
}

/// An unfinished answer's row: `id`, `session_id` and `owner` of `message`.
pub(crate) fn decode_unfinished(row: &impl TextRow) -> Result<Unfinished, StoreError> {
    let id = row
        .text("id")
        .map_err(|e| corrupt("message", "(unknown)", e))?;
    let session = row
        .text("session_id")
        .map_err(|e| corrupt("message", &id, e))?;
    let owner = row.text("owner").map_err(|e| corrupt("message", &id, e))?;
    Ok(Unfinished {
        message: MessageId::parse(&id).map_err(|e| corrupt("message", &id, e))?,
        session: SessionId::parse(&session).map_err(|e| corrupt("message", &id, e))?,
        owner,
    })
}

/// A background record's row: `child_id` and `data`.
pub(crate) fn decode_background(row: &impl TextRow) -> Result<BackgroundTask, StoreError> {
    let what = "background task";
    let id = row
        .text("child_id")
        .map_err(|e| corrupt(what, "(unknown)", e))?;
    let data = row.text("data").map_err(|e| corrupt(what, &id, e))?;
    let task: BackgroundTask = serde_json::from_str(&data).map_err(|e| corrupt(what, &id, e))?;
    if task.child_id.as_str() != id {
        return Err(corrupt(
            what,
            &id,
            format_args!("the payload is background task {}", task.child_id),
        ));
    }
    Ok(task)
}

/// An approval's row of `project`: `permission`, `pattern` and `time_created`.
pub(crate) fn decode_approval(row: &impl TextRow, project: &str) -> Result<Approval, StoreError> {
    let bad = |e: sqlx::Error| corrupt("approval", project, e);
    let created = row.int("time_created").map_err(bad)?;
    Ok(Approval {
        permission: row.text("permission").map_err(bad)?,
        pattern: row.text("pattern").map_err(bad)?,
        created: u64::try_from(created).unwrap_or(0),
    })
}

/// A todo's row of `session`: `position` and `data`.
pub(crate) fn decode_todo(row: &impl TextRow, session: &SessionId) -> Result<Todo, StoreError> {
    let position = row.int("position").unwrap_or(-1);
    let id = format!("{session}#{position}");
    let data = row.text("data").map_err(|e| corrupt("todo", &id, e))?;
    serde_json::from_str(&data).map_err(|e| corrupt("todo", &id, e))
}
