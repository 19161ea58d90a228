//! Moving sessions' `time.updated` forward in place, so that a write of the whole row made
//! meanwhile (a new title) is neither lost nor overwritten.

use sqlx::SqliteConnection;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;

use crate::store::StoreError;
use crate::store::rows::{database, decode_session, to_sql};

/// The most sessions one statement moves (two variables each, far below SQLite's limit).
const PER_STATEMENT: usize = 256;

/// Sets each session's `time_updated` to its time unless it is later already (the payload is
/// not rewritten: reads take the time from that column), a statement per few hundred
/// sessions; answers the sessions as stored after (those not stored are left out). Each
/// statement commits on its own: a touch that is lost leaves an older time, never a wrong one.
pub(super) async fn touch(
    conn: &mut SqliteConnection,
    touches: Vec<(SessionId, u64)>,
) -> Result<Vec<Session>, StoreError> {
    let mut out = Vec::with_capacity(touches.len());
    for chunk in touches.chunks(PER_STATEMENT) {
        let values = vec!["(?, ?)"; chunk.len()].join(", ");
        let sql = format!(
            "UPDATE session SET time_updated = max(session.time_updated, t.at) \
             FROM (SELECT column1 AS id, max(column2) AS at FROM (VALUES {values}) \
                   GROUP BY column1) AS t \
             WHERE session.id = t.id \
             RETURNING id, data, time_updated"
        );
        let mut query = sqlx::query(&sql);
        for (id, at) in chunk {
            query = query.bind(id.as_str()).bind(to_sql(*at));
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
