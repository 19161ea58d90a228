//! Deletes of sessions (with their whole subtree), messages and parts; each runs alone on the
//! write connection.

use sqlx::{Connection, SqliteConnection};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;

use crate::store::StoreError;

use crate::store::rows::{database, doomed};

/// How deep `delete_session` follows parent links; only a corrupt cycle gets near it.
const MAX_TREE_DEPTH: i64 = 4096;

/// Deletes a session's whole subtree in one transaction; descendants come first in the result.
pub(super) async fn tree(
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
             SELECT s.id AS id, s.data AS data, s.time_updated AS time_updated, MAX(t.depth) AS depth \
             FROM tree t JOIN session s ON s.id = t.id \
             GROUP BY s.id \
             ORDER BY depth DESC, s.id DESC",
    )
    .bind(id.as_str())
    .bind(MAX_TREE_DEPTH)
    .fetch_all(&mut *tx)
    .await
    .map_err(database(&context))?;

    let (ids, deleted) = doomed(&rows, &context)?;
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

/// Deletes message `id` of `session`; its parts go with it through `ON DELETE CASCADE`.
pub(super) async fn message(
    conn: &mut SqliteConnection,
    session: String,
    id: String,
    context: String,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM message WHERE id = ?1 AND session_id = ?2")
        .bind(id)
        .bind(session)
        .execute(conn)
        .await
        .map(|_| ())
        .map_err(database(context))
}

/// Deletes part `id`.
pub(super) async fn part(
    conn: &mut SqliteConnection,
    id: String,
    context: String,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM part WHERE id = ?1")
        .bind(id)
        .execute(conn)
        .await
        .map(|_| ())
        .map_err(database(context))
}
