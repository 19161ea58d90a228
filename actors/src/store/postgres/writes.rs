//! Writes other than upserts, each run alone by the writer in queue order: deleting a session's
//! subtree, a message or a part, replacing a todo list, adding approvals, storing a background
//! record, and what several nodes may race for, in one statement each: moving sessions' update
//! times forward and taking over background records and unfinished answers.

use sqlx::PgPool;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Session, Todo};

use crate::store::rows::{database, decode_session, decode_unfinished, doomed, encode, to_sql};
use crate::store::{Approval, BackgroundTask, StoreError, Unfinished};

/// How deep `delete_session` follows parent links; only a corrupt cycle gets near it.
const MAX_TREE_DEPTH: i32 = 4096;

/// Deletes a session's whole subtree in one transaction; descendants come first in the result.
pub(super) async fn tree(
    pool: &PgPool,
    id: SessionId,
    context: String,
) -> Result<Vec<Session>, StoreError> {
    let mut tx = pool.begin().await.map_err(database(&context))?;
    // Deepest first, so every descendant precedes its ancestors; `MAX` keeps one row per
    // session should a corrupt parent cycle make the walk revisit sessions.
    let rows = sqlx::query(
        "WITH RECURSIVE tree (id, depth) AS ( \
               SELECT id, 0 FROM session WHERE id = $1 \
               UNION ALL \
               SELECT s.id, t.depth + 1 FROM session s JOIN tree t ON s.parent_id = t.id \
               WHERE t.depth < $2 \
             ) \
         SELECT s.id AS id, s.data AS data, s.time_updated AS time_updated, t.depth AS depth \
         FROM (SELECT id, MAX(depth) AS depth FROM tree GROUP BY id) t \
         JOIN session s ON s.id = t.id \
         ORDER BY t.depth DESC, s.id DESC",
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
    sqlx::query("DELETE FROM todo WHERE session_id = ANY($1)")
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    // Messages, their parts and background records go with their session (`ON DELETE CASCADE`).
    sqlx::query("DELETE FROM session WHERE id = ANY($1)")
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    tx.commit().await.map_err(database(&context))?;
    Ok(deleted)
}

/// Deletes message `id` of `session`; its parts go with it.
pub(super) async fn message(
    pool: &PgPool,
    session: String,
    id: String,
    context: String,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM message WHERE id = $1 AND session_id = $2")
        .bind(id)
        .bind(session)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(database(context))
}

/// Deletes part `id`.
pub(super) async fn part(pool: &PgPool, id: String, context: String) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM part WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(database(context))
}

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

/// Inserts or replaces the record of `task.child_id`.
pub(super) async fn put_background(
    pool: &PgPool,
    task: BackgroundTask,
    context: String,
) -> Result<(), StoreError> {
    let data = encode("background task", task.child_id.as_str(), &task)?;
    sqlx::query(
        "INSERT INTO background_task (child_id, parent_id, delivered, time_created, data) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (child_id) DO UPDATE SET \
         delivered = excluded.delivered, data = excluded.data",
    )
    .bind(task.child_id.as_str())
    .bind(task.parent_id.as_str())
    .bind(task.delivered)
    .bind(to_sql(task.started))
    .bind(data)
    .execute(pool)
    .await
    .map(|_| ())
    .map_err(database(context))
}

/// Sets the owner of `child`'s undelivered record to `to` if it is still `from`; answers
/// whether it did. One statement: of several nodes claiming at once, one changes the row (the
/// others wait for its commit, then find the owner changed). A record's JSON holds no
/// free-form objects, so `jsonb` may reorder its keys.
pub(super) async fn claim_background(
    pool: &PgPool,
    child: SessionId,
    from: Option<String>,
    to: String,
    context: String,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE background_task \
         SET data = jsonb_set(data::jsonb, '{owner}', to_jsonb($3::text))::text \
         WHERE child_id = $1 AND NOT delivered \
           AND (data::jsonb ->> 'owner') IS NOT DISTINCT FROM $2::text",
    )
    .bind(child.as_str())
    .bind(from)
    .bind(to)
    .execute(pool)
    .await
    .map_err(database(&context))?;
    Ok(done.rows_affected() == 1)
}

/// Makes `to` the owner of the unfinished answers `from` owns (in `session` only, when given);
/// answers those it changed. One statement: of several nodes claiming at once, each answer
/// goes to one of them.
pub(super) async fn claim_unfinished(
    pool: &PgPool,
    from: String,
    to: String,
    session: Option<SessionId>,
    context: String,
) -> Result<Vec<Unfinished>, StoreError> {
    let rows = sqlx::query(
        "UPDATE message SET owner = $2 \
         WHERE owner = $1 AND ($3::text IS NULL OR session_id = $3) \
         RETURNING id, session_id, owner",
    )
    .bind(from)
    .bind(to)
    .bind(session.as_ref().map(SessionId::as_str))
    .fetch_all(pool)
    .await
    .map_err(database(&context))?;
    rows.iter().map(decode_unfinished).collect()
}

/// Moves each session's `time.updated` forward to its time (never back) in one statement,
/// keeping what else is stored (the payload is not rewritten: the column holds the time);
/// answers the sessions as stored after (sessions not stored are left out).
pub(super) async fn touch(
    pool: &PgPool,
    touches: Vec<(SessionId, u64)>,
) -> Result<Vec<Session>, StoreError> {
    let ids: Vec<&str> = touches.iter().map(|(id, _)| id.as_str()).collect();
    let times: Vec<i64> = touches.iter().map(|(_, at)| to_sql(*at)).collect();
    let rows = sqlx::query(
        "UPDATE session AS s SET time_updated = GREATEST(s.time_updated, t.at) \
         FROM (SELECT id, MAX(at) AS at FROM UNNEST($1::text[], $2::int8[]) AS u(id, at) \
               GROUP BY id) t \
         WHERE s.id = t.id \
         RETURNING s.id, s.data, s.time_updated",
    )
    .bind(&ids)
    .bind(times)
    .fetch_all(pool)
    .await
    .map_err(database("cannot update the sessions' times"))?;
    rows.iter().map(decode_session).collect()
}
