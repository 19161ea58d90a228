//! PostgreSQL's text of the statements both stores share (`store/queries.rs`), and how a
//! statement runs on a connection: a list of texts goes in as a `text[]`.

use futures::future::BoxFuture;
use sqlx::postgres::{PgArguments, PgConnection, PgRow, Postgres};
use sqlx::query::Query;

use crate::store::queries::{Arg, Conn, Dialect};

/// The walk of a session's tree (`$1`: its id, `$2`: the deepest it goes), each session
/// with its depth, that the tree's reads and its deletion start from.
macro_rules! tree_walk {
    () => {
        "WITH RECURSIVE tree (id, depth) AS ( \
           SELECT id, 0::int8 FROM session WHERE id = $1 \
           UNION ALL \
           SELECT s.id, t.depth + 1 FROM session s JOIN tree t ON s.parent_id = t.id \
           WHERE t.depth < $2 \
         ) "
    };
}

/// The shared statements, in PostgreSQL's words.
const SQL: Dialect = Dialect {
    session: "SELECT id, data, time_updated FROM session WHERE id = $1",
    sessions_in: "SELECT id, data, time_updated FROM session WHERE id = ANY($1)",
    sessions: "SELECT id, data, time_updated FROM session \
         WHERE (NOT $1 OR parent_id IS NULL) \
           AND ($2::int8 IS NULL OR time_updated >= $2) \
           AND ($3::text IS NULL OR strpos(title_folded, $3) > 0) \
           AND ($5::text IS NULL OR project_id = $5) \
         ORDER BY time_updated DESC, time_created DESC, id DESC \
         LIMIT $4",
    children: "SELECT id, data, time_updated FROM session WHERE parent_id = $1 \
         ORDER BY time_created ASC, id ASC",
    message: "SELECT 0::int8 AS kind, id, data FROM message WHERE id = $1 AND session_id = $2 \
         UNION ALL \
         SELECT 1::int8 AS kind, id, data FROM part WHERE message_id = $1 AND session_id = $2 \
         ORDER BY kind, id",
    // Messages by creation time, ties in the order they were first stored; parts by id, found
    // through their messages (parts have no index by session).
    messages: "SELECT 0::int8 AS kind, time_created AS t, seq AS ord, id, data FROM message \
         WHERE session_id = $1 \
         UNION ALL \
         SELECT 1::int8 AS kind, 0::int8 AS t, 0::int8 AS ord, id, data FROM part \
         WHERE message_id IN (SELECT id FROM message WHERE session_id = $1) \
           AND session_id = $1 \
         ORDER BY kind, t, ord, id",
    todos: "SELECT position, data FROM todo WHERE session_id = $1 ORDER BY position",
    approvals: "SELECT permission, pattern, time_created FROM permission_approval \
         WHERE project_id = $1 ORDER BY time_created, permission, pattern",
    background: "SELECT child_id, data FROM background_task WHERE child_id = $1",
    undelivered: "SELECT child_id, data FROM background_task WHERE NOT delivered \
         ORDER BY time_created, child_id",
    unfinished: "SELECT id, session_id, owner FROM message \
         WHERE owner IS NOT NULL AND ($1::text IS NULL OR session_id = $1) ORDER BY id",
    // `MIN` keeps one row per session should a corrupt parent cycle make the walk revisit
    // sessions.
    tree_sessions: concat!(
        tree_walk!(),
        "SELECT s.id AS id, s.data AS data, s.time_updated AS time_updated \
         FROM (SELECT id, MIN(depth) AS depth FROM tree GROUP BY id) t \
         JOIN session s ON s.id = t.id \
         ORDER BY t.depth, s.time_created, s.id"
    ),
    tree_messages: concat!(
        tree_walk!(),
        "SELECT m.session_id AS session_id, m.id AS id, m.data AS data FROM message m \
         WHERE m.session_id IN (SELECT id FROM tree) \
         ORDER BY m.session_id, m.time_created, m.seq"
    ),
    // `MAX` keeps one row per session should a corrupt parent cycle make the walk revisit
    // sessions.
    subtree: concat!(
        tree_walk!(),
        "SELECT s.id AS id, s.data AS data, s.time_updated AS time_updated, t.depth AS depth \
         FROM (SELECT id, MAX(depth) AS depth FROM tree GROUP BY id) t \
         JOIN session s ON s.id = t.id \
         ORDER BY t.depth DESC, s.id DESC"
    ),
    delete_todos_of: "DELETE FROM todo WHERE session_id = ANY($1)",
    // Messages, their parts and background records go with their session (`ON DELETE
    // CASCADE`).
    delete_sessions: "DELETE FROM session WHERE id = ANY($1)",
    delete_message: "DELETE FROM message WHERE id = $1 AND session_id = $2",
    delete_part: "DELETE FROM part WHERE id = $1",
    session_to_edit: "SELECT id, data, time_updated FROM session WHERE id = $1 FOR UPDATE",
    edit_session: "UPDATE session SET parent_id = $2, project_id = $3, title = $4, \
         title_folded = $5, time_created = $6, time_updated = GREATEST(time_updated, $7), \
         data = $8 WHERE id = $1",
    put_background: "INSERT INTO background_task \
         (child_id, parent_id, delivered, time_created, data) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (child_id) DO UPDATE SET \
         delivered = excluded.delivered, data = excluded.data",
    // A record's JSON holds no free-form objects, so `jsonb` may reorder its keys. Of several
    // nodes claiming at once, one changes the row; the others wait for its commit, then find
    // the owner changed.
    claim_background: "UPDATE background_task \
         SET data = jsonb_set(data::jsonb, '{owner}', to_jsonb($3::text))::text \
         WHERE child_id = $1 AND NOT delivered \
           AND (data::jsonb ->> 'owner') IS NOT DISTINCT FROM $2::text",
    claim_unfinished: "UPDATE message SET owner = $2 \
         WHERE owner = $1 AND ($3::text IS NULL OR session_id = $3) \
         RETURNING id, session_id, owner",
};

/// `query` with `args` bound in order.
fn bound<'q>(
    mut query: Query<'q, Postgres, PgArguments>,
    args: &'q [Arg<'q>],
) -> Query<'q, Postgres, PgArguments> {
    for arg in args {
        query = match *arg {
            Arg::Text(text) => query.bind(text),
            Arg::MaybeText(text) => query.bind(text),
            Arg::MaybeInt(n) => query.bind(n),
            Arg::Bool(b) => query.bind(b),
            Arg::Texts(list) => query.bind(list),
        };
    }
    query
}

impl Conn for PgConnection {
    const SQL: &'static Dialect = &SQL;
    type Row = PgRow;

    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<Vec<PgRow>, sqlx::Error>> {
        Box::pin(bound(sqlx::query(sql), args).fetch_all(self))
    }

    fn run<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
        Box::pin(async move {
            let done = bound(sqlx::query(sql), args).execute(self).await?;
            Ok(done.rows_affected())
        })
    }
}
