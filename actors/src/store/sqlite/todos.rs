//! The `todo` table: each session's todo list, read whole and replaced whole.

use sqlx::{Connection, SqliteConnection};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Todo;

use crate::store::StoreError;
use crate::store::rows::{database, decode_todo, encode};

/// The todo list of `session`, in order.
pub(super) async fn read(
    conn: &mut SqliteConnection,
    session: &SessionId,
) -> Result<Vec<Todo>, StoreError> {
    let rows =
        sqlx::query("SELECT position, data FROM todo WHERE session_id = ?1 ORDER BY position")
            .bind(session.as_str())
            .fetch_all(conn)
            .await
            .map_err(database(format_args!(
                "cannot read the todos of session {session}"
            )))?;
    rows.iter().map(|row| decode_todo(row, session)).collect()
}

/// Replaces a session's todo list in one transaction.
pub(super) async fn replace(
    conn: &mut SqliteConnection,
    session: SessionId,
    todos: Vec<Todo>,
    context: String,
) -> Result<(), StoreError> {
    let mut tx = conn.begin().await.map_err(database(&context))?;
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
