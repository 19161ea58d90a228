//! Moving sessions' `time.updated` forward in place, so that a write of the whole row made
//! meanwhile (a new title) is neither lost nor overwritten.

use sqlx::{Connection, SqliteConnection};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;

use crate::store::StoreError;

use crate::store::rows::{database, decode_session};

/// Sets each session's `time.updated` to its time unless it is later already, in one
/// transaction; answers the sessions as stored after (those not stored are left out).
pub(super) async fn touch(
    conn: &mut SqliteConnection,
    touches: Vec<(SessionId, u64)>,
) -> Result<Vec<Session>, StoreError> {
    let context = "cannot update the sessions' times";
    let mut tx = conn.begin().await.map_err(database(context))?;
    let mut out = Vec::with_capacity(touches.len());
    for (id, at) in touches {
        let at = i64::try_from(at).unwrap_or(i64::MAX);
        let row = sqlx::query(
            "UPDATE session SET time_updated = max(time_updated, ?1), \
             data = json_set(data, '$.time.updated', max(time_updated, ?1)) \
             WHERE id = ?2 RETURNING id, data",
        )
        .bind(at)
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(database(format_args!(
            "cannot update the time of session {id}"
        )))?;
        if let Some(row) = row {
            out.push(decode_session(&row)?);
        }
    }
    tx.commit().await.map_err(database(context))?;
    Ok(out)
}
