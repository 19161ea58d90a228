//! Reads, each one statement on a pooled connection: sessions, messages with their parts (one
//! statement, so one snapshot), todos, approvals, background records and unfinished answers.

use sqlx::PgPool;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{Session, Todo};

use crate::store::rows::{
    assemble, database, decode_approval, decode_background, decode_session, decode_todo,
    decode_unfinished, to_sql,
};
use crate::store::{
    Approval, BackgroundTask, MessageWithParts, SessionFilter, StoreError, Unfinished,
};

/// Session `id`, if stored.
pub(super) async fn session(pool: &PgPool, id: &SessionId) -> Result<Option<Session>, StoreError> {
    let row = sqlx::query("SELECT id, data, time_updated FROM session WHERE id = $1")
        .bind(id.as_str())
        .fetch_optional(pool)
        .await
        .map_err(database(format_args!("cannot read session {id}")))?;
    row.map(|row| decode_session(&row)).transpose()
}

/// The sessions that `filter` selects, most recently updated first.
pub(super) async fn sessions(
    pool: &PgPool,
    filter: &SessionFilter,
) -> Result<Vec<Session>, StoreError> {
    let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let rows = sqlx::query(
        "SELECT id, data, time_updated FROM session \
         WHERE (NOT $1 OR parent_id IS NULL) \
           AND ($2::int8 IS NULL OR time_updated >= $2) \
           AND ($3::text IS NULL OR strpos(title_folded, $3) > 0) \
           AND ($5::text IS NULL OR project_id = $5) \
         ORDER BY time_updated DESC, time_created DESC, id DESC \
         LIMIT $4",
    )
    .bind(filter.roots)
    .bind(filter.start.map(to_sql))
    .bind(filter.search.as_deref().map(str::to_lowercase))
    .bind(limit)
    .bind(filter.project_id.as_deref())
    .fetch_all(pool)
    .await
    .map_err(database("cannot list sessions"))?;
    rows.iter().map(decode_session).collect()
}

/// The direct children of session `id`, oldest first.
pub(super) async fn children(pool: &PgPool, id: &SessionId) -> Result<Vec<Session>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, data, time_updated FROM session WHERE parent_id = $1 ORDER BY time_created ASC, id ASC",
    )
    .bind(id.as_str())
    .fetch_all(pool)
    .await
    .map_err(database(format_args!(
        "cannot list the children of session {id}"
    )))?;
    rows.iter().map(decode_session).collect()
}

/// Message `id` of `session` with its parts, if stored.
pub(super) async fn message(
    pool: &PgPool,
    session: &SessionId,
    id: &MessageId,
) -> Result<Option<MessageWithParts>, StoreError> {
    let context = format!("cannot read message {id} of session {session}");
    let rows = sqlx::query(
        "SELECT 0::int8 AS kind, id, data FROM message WHERE id = $1 AND session_id = $2 \
         UNION ALL \
         SELECT 1::int8 AS kind, id, data FROM part WHERE message_id = $1 AND session_id = $2 \
         ORDER BY kind, id",
    )
    .bind(id.as_str())
    .bind(session.as_str())
    .fetch_all(pool)
    .await
    .map_err(database(&context))?;
    Ok(assemble(&rows, &context)?.pop())
}

/// Every message of `session` with its parts: messages by creation time, ties in the order
/// they were first stored; parts by id.
pub(super) async fn messages(
    pool: &PgPool,
    session: &SessionId,
) -> Result<Vec<MessageWithParts>, StoreError> {
    let context = format!("cannot read the messages of session {session}");
    let rows = sqlx::query(
        "SELECT 0::int8 AS kind, time_created AS t, seq AS ord, id, data FROM message \
         WHERE session_id = $1 \
         UNION ALL \
         SELECT 1::int8 AS kind, 0::int8 AS t, 0::int8 AS ord, id, data FROM part \
         WHERE session_id = $1 \
         ORDER BY kind, t, ord, id",
    )
    .bind(session.as_str())
    .fetch_all(pool)
    .await
    .map_err(database(&context))?;
    assemble(&rows, &context)
}

/// The todo list of `session`, in order.
pub(super) async fn todos(pool: &PgPool, session: &SessionId) -> Result<Vec<Todo>, StoreError> {
    let rows =
        sqlx::query("SELECT position, data FROM todo WHERE session_id = $1 ORDER BY position")
            .bind(session.as_str())
            .fetch_all(pool)
            .await
            .map_err(database(format_args!(
                "cannot read the todos of session {session}"
            )))?;
    rows.iter().map(|row| decode_todo(row, session)).collect()
}

/// Every approval of `project`, oldest first.
pub(super) async fn approvals(pool: &PgPool, project: &str) -> Result<Vec<Approval>, StoreError> {
    let rows = sqlx::query(
        "SELECT permission, pattern, time_created FROM permission_approval \
         WHERE project_id = $1 ORDER BY time_created, permission, pattern",
    )
    .bind(project)
    .fetch_all(pool)
    .await
    .map_err(database(format_args!(
        "cannot read the approvals of project {project}"
    )))?;
    rows.iter()
        .map(|row| decode_approval(row, project))
        .collect()
}

/// The record of `child`, if it ran in the background.
pub(super) async fn background(
    pool: &PgPool,
    child: &SessionId,
) -> Result<Option<BackgroundTask>, StoreError> {
    let row = sqlx::query("SELECT child_id, data FROM background_task WHERE child_id = $1")
        .bind(child.as_str())
        .fetch_optional(pool)
        .await
        .map_err(database(format_args!(
            "cannot read the background task {child}"
        )))?;
    row.map(|row| decode_background(&row)).transpose()
}

/// Every background record whose result is not delivered yet, oldest first.
pub(super) async fn undelivered(pool: &PgPool) -> Result<Vec<BackgroundTask>, StoreError> {
    let rows = sqlx::query(
        "SELECT child_id, data FROM background_task WHERE NOT delivered \
         ORDER BY time_created, child_id",
    )
    .fetch_all(pool)
    .await
    .map_err(database("cannot read the undelivered background tasks"))?;
    rows.iter().map(decode_background).collect()
}

/// The unfinished answers of `session` (of every session when `None`).
pub(super) async fn unfinished(
    pool: &PgPool,
    session: Option<&SessionId>,
) -> Result<Vec<Unfinished>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, session_id, owner FROM message \
         WHERE owner IS NOT NULL AND ($1::text IS NULL OR session_id = $1) ORDER BY id",
    )
    .bind(session.map(SessionId::as_str))
    .fetch_all(pool)
    .await
    .map_err(database("cannot read the unfinished answers"))?;
    rows.iter().map(decode_unfinished).collect()
}
