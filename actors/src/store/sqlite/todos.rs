//! Replacing a session's todo list (the `todo` table) whole, one row at a time in one
//! transaction.

use sqlx::{Connection, SqliteConnection};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Todo;

use crate::store::StoreError;
use crate::store::rows::{database, encode};

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
