//! Moving sessions' `time.updated` forward in place, so that a write of the whole row made
//! meanwhile (a new title) is neither lost nor overwritten.

use sqlx::SqliteConnection;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;

use crate::store::StoreError;
use crate::store::rows::{database, decode_session, to_sql};

use super::statements::{CHUNKS, chunks};

/// Sets each session's `time_updated` to its time unless it is later already (the payload is
/// not rewritten: reads take the time from that column), in statements of the upserts' fixed
/// row counts padded with NULL rows (so that a few statements are cached, not one per count);
/// answers the sessions as stored after (those not stored are left out). Each statement
/// commits on its own: a touch that is lost leaves an older time, never a wrong one.
pub(super) async fn touch(
    conn: &mut SqliteConnection,
    touches: Vec<(SessionId, u64)>,
) -> Result<Vec<Session>, StoreError> {
    let mut out = Vec::with_capacity(touches.len());
    let mut rest = touches.as_slice();
    for (taken, chunk) in chunks(touches.len()) {
        let (head, tail) = rest.split_at(taken);
        rest = tail;
        let values = vec!["(?, ?)"; CHUNKS[chunk]].join(", ");
        let sql = format!(
            "UPDATE session SET time_updated = max(session.time_updated, t.at) \
             FROM (SELECT column1 AS id, max(column2) AS at FROM (VALUES {values}) \
                   WHERE column1 IS NOT NULL GROUP BY column1) AS t \
             WHERE session.id = t.id \
             RETURNING id, data, time_updated"
        );
        let mut query = sqlx::query(&sql);
        for (id, at) in head {
            query = query.bind(id.as_str()).bind(to_sql(*at));
        }
        for _ in taken..CHUNKS[chunk] {
            query = query.bind(None::<&str>).bind(None::<i64>);
        }
        let rows = query
            .fetch_all(&mut *conn)
            .await
            .map_err(database("cannot update the sessions' times"))?;
        for row in &rows {
            out.push(decode_session(row)?);
        }
    }
    Ok(out)
}
