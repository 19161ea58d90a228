//! The writes whose shape is PostgreSQL's own, each run alone by the writer in queue order:
//! replacing a todo list and adding approvals (each list bound as arrays, in one statement).
//! The deletes and claims both stores share are in `store/queries.rs`.

use sqlx::PgPool;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Todo;

use crate::store::rows::{database, encode, to_sql};
use crate::store::{Approval, StoreError};

/// Replaces a session's todo list in one transaction.
pub(super) async fn todos(
    pool: &PgPool,
    session: SessionId,
    todos: Vec<Todo>,
    context: String,
) -> Result<(), StoreError> {
    let data = todos
        .iter()
        .map(|todo| encode("todo", &todo.id, todo))
        .collect::<Result<Vec<String>, StoreError>>()?;
    let mut tx = pool.begin().await.map_err(database(&context))?;
    sqlx::query("DELETE FROM todo WHERE session_id = $1")
        .bind(session.as_str())
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    if !data.is_empty() {
        sqlx::query(
            "INSERT INTO todo (session_id, position, data) \
             SELECT $1, position - 1, data FROM UNNEST($2::text[]) WITH ORDINALITY AS t(data, position)",
        )
        .bind(session.as_str())
        .bind(data)
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    }
    tx.commit().await.map_err(database(&context))
}

/// Adds approvals of `project` in one statement; those stored already keep their first time.
pub(super) async fn approvals(
    pool: &PgPool,
    project: String,
    approvals: Vec<Approval>,
    context: String,
) -> Result<(), StoreError> {
    let permissions: Vec<&str> = approvals.iter().map(|a| a.permission.as_str()).collect();
    let patterns: Vec<&str> = approvals.iter().map(|a| a.pattern.as_str()).collect();
    let created: Vec<i64> = approvals.iter().map(|a| to_sql(a.created)).collect();
    sqlx::query(
        "INSERT INTO permission_approval (project_id, permission, pattern, time_created) \
         SELECT $1, permission, pattern, created \
         FROM UNNEST($2::text[], $3::text[], $4::int8[]) AS a(permission, pattern, created) \
         ON CONFLICT DO NOTHING",
    )
    .bind(project)
    .bind(permissions)
    .bind(patterns)
    .bind(created)
    .execute(pool)
    .await
    .map(|_| ())
    .map_err(database(context))
}
