//! Unfinished answers and the runtime writing each (the `owner` column of `message`, migration
//! 0006): how a runtime finds the answers that a runtime which died left half-written, and
//! takes them over before repairing them.

use sqlx::SqliteConnection;
use taskforce_agents::id::SessionId;

use crate::store::rows::{database, decode_unfinished as decode};
use crate::store::{StoreError, Unfinished};

/// The unfinished answers of `session` (of every session when `None`).
pub(super) async fn unfinished(
    conn: &mut SqliteConnection,
    session: Option<&SessionId>,
) -> Result<Vec<Unfinished>, StoreError> {
    let rows = match session {
        Some(session) => {
            sqlx::query(
                "SELECT id, session_id, owner FROM message \
             WHERE session_id = ?1 AND owner IS NOT NULL ORDER BY id",
            )
            .bind(session.as_str())
            .fetch_all(conn)
            .await
        }
        None => {
            sqlx::query(
                "SELECT id, session_id, owner FROM message WHERE owner IS NOT NULL ORDER BY id",
            )
            .fetch_all(conn)
            .await
        }
    }
    .map_err(database("cannot read the unfinished answers"))?;
    rows.iter().map(decode).collect()
}

/// Makes `to` the owner of the unfinished answers `from` owns (in `session` only, when given);
/// answers those it changed. One statement: of two runtimes claiming at once, each answer goes
/// to one of them.
pub(super) async fn claim(
    conn: &mut SqliteConnection,
    from: String,
    to: String,
    session: Option<SessionId>,
    context: String,
) -> Result<Vec<Unfinished>, StoreError> {
    let rows = sqlx::query(
        "UPDATE message SET owner = ?2 \
         WHERE owner = ?1 AND (?3 IS NULL OR session_id = ?3) \
         RETURNING id, session_id, owner",
    )
    .bind(from)
    .bind(to)
    .bind(session.as_ref().map(SessionId::as_str))
    .fetch_all(conn)
    .await
    .map_err(database(&context))?;
    rows.iter().map(decode).collect()
}
