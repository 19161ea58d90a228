//! Rows of the SQLite store: encoding and decoding the JSON payloads, error mapping.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::SqliteRow;

use sqlx::Row;
use taskforce_agents::id::MessageId;
use taskforce_agents::model::{Message, Part, Session};

use crate::store::{MessageWithParts, StoreError};

/// Messages (kind 0) and parts (kind 1), each ordered by id, put together; parts of messages
/// that are not in the rows are dropped.
pub(super) fn assemble(
    rows: &[SqliteRow],
    context: &str,
) -> Result<Vec<MessageWithParts>, StoreError> {
    let mut messages: Vec<MessageWithParts> = Vec::new();
    let mut index: HashMap<MessageId, usize, foldhash::fast::RandomState> = HashMap::default();
    for row in rows {
        let kind: i64 = row.try_get("kind").map_err(database(context))?;
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
pub(super) fn database(context: impl Display) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| StoreError::Database(format!("{context}: {error}"))
}

/// A [`StoreError::Corrupt`] for the row `id` of `what`.
pub(super) fn corrupt(what: &'static str, id: &str, message: impl Display) -> StoreError {
    StoreError::Corrupt {
        what,
        id: id.to_string(),
        message: message.to_string(),
    }
}

/// An epoch-milliseconds time as an SQLite integer (saturating far beyond any real date).
pub(super) fn to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The JSON payload of a domain value.
pub(super) fn encode<T: Serialize>(what: &str, id: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("cannot encode {what} {id}: {e}")))
}

/// The `id` and `data` columns of a row, decoded as `T`; the payload must carry the row's id.
pub(super) fn decode_row<T: DeserializeOwned>(
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
pub(super) fn decode_session(row: &SqliteRow) -> Result<Session, StoreError> {
    decode_row(row, "session", |s: &Session| s.id.as_str())
}

/// A message row.
pub(super) fn decode_message(row: &SqliteRow) -> Result<Message, StoreError> {
    decode_row(row, "message", |m: &Message| m.id().as_str())
}

/// A part row.
pub(super) fn decode_part(row: &SqliteRow) -> Result<Part, StoreError> {
    decode_row(row, "part", |p: &Part| p.id.as_str())
}
