//! The `background_task` table: background subagents and the delivery of their results
//! (migration 0004).

use sqlx::SqliteConnection;
use taskforce_agents::id::SessionId;

use crate::store::rows::{database, decode_background as decode, encode, to_sql};
use crate::store::{BackgroundTask, StoreError};

/// Inserts or replaces the record of `task.child_id`.
pub(super) async fn put(
    conn: &mut SqliteConnection,
    task: BackgroundTask,
    context: String,
) -> Result<(), StoreError> {
    let data = encode("background task", task.child_id.as_str(), &task)?;
    sqlx::query(
        "INSERT INTO background_task (child_id, parent_id, delivered, time_created, data) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (child_id) DO UPDATE SET \
         delivered = excluded.delivered, data = excluded.data",
    )
    .bind(task.child_id.as_str())
    .bind(task.parent_id.as_str())
    .bind(i64::from(task.delivered))
    .bind(to_sql(task.started))
    .bind(data)
    .execute(conn)
    .await
    .map_err(database(&context))?;
    Ok(())
}

/// Sets the owner of `child`'s undelivered record to `to` if it is still `from`; answers
/// whether it did (one statement: of two processes claiming at once, one changes the row).
pub(super) async fn claim(
    conn: &mut SqliteConnection,
    child: SessionId,
    from: Option<String>,
    to: String,
    context: String,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE background_task SET data = json_set(data, '$.owner', ?3) \
         WHERE child_id = ?1 AND delivered = 0 AND json_extract(data, '$.owner') IS ?2",
    )
    .bind(child.as_str())
    .bind(from)
    .bind(to)
    .execute(conn)
    .await
    .map_err(database(&context))?;
    Ok(done.rows_affected() == 1)
}

/// The record of `child`, if it ran in the background.
pub(super) async fn one(
    conn: &mut SqliteConnection,
    child: &SessionId,
) -> Result<Option<BackgroundTask>, StoreError> {
    let row = sqlx::query("SELECT child_id, data FROM background_task WHERE child_id = ?1")
        .bind(child.as_str())
        .fetch_optional(conn)
        .await
        .map_err(database(format_args!(
            "cannot read the background task {child}"
        )))?;
    row.map(|row| decode(&row)).transpose()
}

/// Every record whose result is not delivered yet, oldest first.
pub(super) async fn undelivered(
    conn: &mut SqliteConnection,
) -> Result<Vec<BackgroundTask>, StoreError> {
    let rows = sqlx::query(
        "SELECT child_id, data FROM background_task WHERE delivered = 0 ORDER BY time_created",
    )
    .fetch_all(conn)
    .await
    .map_err(database("cannot read the undelivered background tasks"))?;
    rows.iter().map(decode).collect()
}
