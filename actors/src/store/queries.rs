//! The statements both SQL stores run alike: reads of sessions, trees, messages, todos, approvals,
//! background records and unfinished answers; deletes; claims. Each backend supplies a
//! [`Conn`] that runs a statement with its arguments, and its SQL text (a [`Dialect`]); how the
//! arguments go in, how the rows come back and what an error says are written once, here.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{Session, Todo};

use super::rows::{
    TextRow, assemble, database, decode_approval, decode_background, decode_message,
    decode_session, decode_todo, decode_unfinished, doomed, encode, read_back_session, to_sql,
};
use super::write::fold_title;
use super::{
    Approval, BackgroundTask, MessageWithParts, SessionFilter, StoreError, TreeSession, Unfinished,
};

/// An argument of a statement.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    /// A text.
    Text(&'a str),
    /// A text or NULL.
    MaybeText(Option<&'a str>),
    /// An integer or NULL.
    MaybeInt(Option<i64>),
    /// A boolean.
    Bool(bool),
    /// A list of texts, as the backend takes one (an array, or a JSON list).
    Texts(&'a [String]),
}

/// A connection of one backend that runs a statement with its arguments.
pub(crate) trait Conn: Send {
    /// A row of the backend.
    type Row: TextRow + Send;

    /// The backend's text of the shared statements.
    const SQL: &'static Dialect;

    /// Runs `sql` with `args`, answering its rows.
    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<Vec<Self::Row>, sqlx::Error>>;

    /// Runs `sql` with `args`, answering how many rows it changed.
    fn run<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<u64, sqlx::Error>>;
}

/// The SQL text of the shared statements in one backend's dialect. Each takes the arguments
/// its function here binds, in that order.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// One session (`id`): `id, data, time_updated`.
    pub session: &'static str,
    /// The sessions listed (`ids`, a list of texts) that are stored: `id, data, time_updated`.
    pub sessions_in: &'static str,
    /// Sessions by filter (roots only, updated since, title search, limit or NULL, project).
    pub sessions: &'static str,
    /// The children of a session (`parent_id`), oldest first.
    pub children: &'static str,
    /// One message (`id`, `session`) and its parts: `kind, id, data`.
    pub message: &'static str,
    /// The messages of a session and their parts: `kind, id, data`, in order.
    pub messages: &'static str,
    /// A session's todo list (`session`): `position, data`.
    pub todos: &'static str,
    /// A project's approvals (`project`).
    pub approvals: &'static str,
    /// One background record (`child`): `child_id, data`.
    pub background: &'static str,
    /// The background records not delivered yet, oldest first.
    pub undelivered: &'static str,
    /// Unfinished answers (`session` or NULL): `id, session_id, owner`.
    pub unfinished: &'static str,
    /// A session's tree (`id`, the deepest walk), each session before its children, siblings
    /// oldest first: `id, data, time_updated`.
    pub tree_sessions: &'static str,
    /// The messages of a session's tree (`id`, the deepest walk), in order by session:
    /// `session_id, id, data`.
    pub tree_messages: &'static str,
    /// A session's subtree (`id`, the deepest walk), deepest first: `id, data, time_updated`.
    pub subtree: &'static str,
    /// Deletes the todos of the sessions listed.
    pub delete_todos_of: &'static str,
    /// Deletes the sessions listed (their messages, parts and records go with them).
    pub delete_sessions: &'static str,
    /// Deletes a message (`id`, `session`).
    pub delete_message: &'static str,
    /// Deletes a part (`id`).
    pub delete_part: &'static str,
    /// One session (`id`) about to be edited, its row held until the transaction ends:
    /// `id, data, time_updated`.
    pub session_to_edit: &'static str,
    /// Rewrites a stored session's row (id, parent, project, title, folded title, created,
    /// updated, data), its `time_updated` never going back; inserts nothing.
    pub edit_session: &'static str,
    /// Inserts or replaces a background record (child, parent, delivered, created, data).
    pub put_background: &'static str,
    /// Sets a background record's owner (child, from or NULL, to) if it is still `from`.
    pub claim_background: &'static str,
    /// Moves unfinished answers (from, to, session or NULL) to a new owner, answering them.
    pub claim_unfinished: &'static str,
}

/// How deep a subtree's deletion follows parent links; only a corrupt cycle gets near it.
const MAX_TREE_DEPTH: i64 = 4096;

/// Session `id`, if stored.
pub(crate) async fn session<C: Conn>(
    conn: &mut C,
    id: &SessionId,
) -> Result<Option<Session>, StoreError> {
    let rows = conn
        .fetch(C::SQL.session, &[Arg::Text(id.as_str())])
        .await
        .map_err(database(format_args!("cannot read session {id}")))?;
    rows.first().map(decode_session).transpose()
}

/// Those of the sessions `ids` that are stored, read back right after this process wrote them
/// (see [`read_back_session`]).
pub(crate) async fn sessions_in<C: Conn>(
    conn: &mut C,
    ids: &[String],
) -> Result<Vec<Session>, StoreError> {
    let rows = conn
        .fetch(C::SQL.sessions_in, &[Arg::Texts(ids)])
        .await
        .map_err(database("cannot read the sessions"))?;
    rows.iter().map(read_back_session).collect()
}

/// The sessions that `filter` selects, most recently updated first.
pub(crate) async fn sessions<C: Conn>(
    conn: &mut C,
    filter: &SessionFilter,
) -> Result<Vec<Session>, StoreError> {
    let search = filter.search.as_deref().map(fold_title);
    let args = [
        Arg::Bool(filter.roots),
        Arg::MaybeInt(filter.start.map(to_sql)),
        Arg::MaybeText(search.as_deref()),
        Arg::MaybeInt(filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX))),
        Arg::MaybeText(filter.project_id.as_deref()),
    ];
    let rows = conn
        .fetch(C::SQL.sessions, &args)
        .await
        .map_err(database("cannot list sessions"))?;
    rows.iter().map(decode_session).collect()
}

/// The direct children of session `id`, oldest first.
pub(crate) async fn children<C: Conn>(
    conn: &mut C,
    id: &SessionId,
) -> Result<Vec<Session>, StoreError> {
    let rows = conn
        .fetch(C::SQL.children, &[Arg::Text(id.as_str())])
        .await
        .map_err(database(format_args!(
            "cannot list the children of session {id}"
        )))?;
    rows.iter().map(decode_session).collect()
}

/// Message `id` of `session` with its parts, if stored; one statement, so one snapshot.
pub(crate) async fn message<C: Conn>(
    conn: &mut C,
    session: &SessionId,
    id: &MessageId,
) -> Result<Option<MessageWithParts>, StoreError> {
    let context = format!("cannot read message {id} of session {session}");
    let args = [Arg::Text(id.as_str()), Arg::Text(session.as_str())];
    let rows = conn
        .fetch(C::SQL.message, &args)
        .await
        .map_err(database(&context))?;
    Ok(assemble(&rows, &context)?.pop())
}

/// Every message of `session` with its parts, in the order they were created; one statement,
/// so one snapshot.
pub(crate) async fn messages<C: Conn>(
    conn: &mut C,
    session: &SessionId,
) -> Result<Vec<MessageWithParts>, StoreError> {
    let context = format!("cannot read the messages of session {session}");
    let rows = conn
        .fetch(C::SQL.messages, &[Arg::Text(session.as_str())])
        .await
        .map_err(database(&context))?;
    assemble(&rows, &context)
}

/// The todo list of `session`, in order.
pub(crate) async fn todos<C: Conn>(
    conn: &mut C,
    session: &SessionId,
) -> Result<Vec<Todo>, StoreError> {
    let rows = conn
        .fetch(C::SQL.todos, &[Arg::Text(session.as_str())])
        .await
        .map_err(database(format_args!(
            "cannot read the todos of session {session}"
        )))?;
    rows.iter().map(|row| decode_todo(row, session)).collect()
}

/// Every approval of `project`, oldest first.
pub(crate) async fn approvals<C: Conn>(
    conn: &mut C,
    project: &str,
) -> Result<Vec<Approval>, StoreError> {
    let rows = conn
        .fetch(C::SQL.approvals, &[Arg::Text(project)])
        .await
        .map_err(database(format_args!(
            "cannot read the approvals of project {project}"
        )))?;
    rows.iter()
        .map(|row| decode_approval(row, project))
        .collect()
}

/// The record of `child`, if it ran in the background.
pub(crate) async fn background<C: Conn>(
    conn: &mut C,
    child: &SessionId,
) -> Result<Option<BackgroundTask>, StoreError> {
    let rows = conn
        .fetch(C::SQL.background, &[Arg::Text(child.as_str())])
        .await
        .map_err(database(format_args!(
            "cannot read the background task {child}"
        )))?;
    rows.first().map(decode_background).transpose()
}

/// Every background record whose result is not delivered yet, oldest first.
pub(crate) async fn undelivered<C: Conn>(conn: &mut C) -> Result<Vec<BackgroundTask>, StoreError> {
    let rows = conn
        .fetch(C::SQL.undelivered, &[])
        .await
        .map_err(database("cannot read the undelivered background tasks"))?;
    rows.iter().map(decode_background).collect()
}

/// The unfinished answers of `session` (of every session when `None`).
pub(crate) async fn unfinished<C: Conn>(
    conn: &mut C,
    session: Option<&SessionId>,
) -> Result<Vec<Unfinished>, StoreError> {
    let rows = conn
        .fetch(
            C::SQL.unfinished,
            &[Arg::MaybeText(session.map(SessionId::as_str))],
        )
        .await
        .map_err(database("cannot read the unfinished answers"))?;
    rows.iter().map(decode_unfinished).collect()
}

/// Every session of `root`'s tree with its messages (without parts): two statements, the
/// sessions then their messages; a message of a session the first did not see is left out.
pub(crate) async fn tree<C: Conn>(
    conn: &mut C,
    root: &SessionId,
) -> Result<Vec<TreeSession>, StoreError> {
    let context = format!("cannot read the tree of session {root}");
    let args = [
        Arg::Text(root.as_str()),
        Arg::MaybeInt(Some(MAX_TREE_DEPTH)),
    ];
    let rows = conn
        .fetch(C::SQL.tree_sessions, &args)
        .await
        .map_err(database(&context))?;
    let mut tree = Vec::with_capacity(rows.len());
    let mut index: HashMap<String, usize, foldhash::fast::RandomState> = HashMap::default();
    for row in &rows {
        let session = decode_session(row)?;
        index.insert(session.id.to_string(), tree.len());
        tree.push(TreeSession {
            session,
            messages: Vec::new(),
        });
    }
    let rows = conn
        .fetch(C::SQL.tree_messages, &args)
        .await
        .map_err(database(&context))?;
    for row in &rows {
        let session = row.text("session_id").map_err(database(&context))?;
        if let Some(&i) = index.get(&session) {
            tree[i].messages.push(Arc::new(decode_message(row)?));
        }
    }
    Ok(tree)
}

/// Deletes session `id`'s whole subtree, on a connection inside a transaction the caller
/// commits; descendants come first in the result.
pub(crate) async fn delete_tree<C: Conn>(
    conn: &mut C,
    id: &SessionId,
    context: &str,
) -> Result<Vec<Session>, StoreError> {
    let args = [Arg::Text(id.as_str()), Arg::MaybeInt(Some(MAX_TREE_DEPTH))];
    let rows = conn
        .fetch(C::SQL.subtree, &args)
        .await
        .map_err(database(context))?;
    let (ids, deleted) = doomed(&rows, context)?;
    if ids.is_empty() {
        return Ok(deleted);
    }
    conn.run(C::SQL.delete_todos_of, &[Arg::Texts(&ids)])
        .await
        .map_err(database(context))?;
    conn.run(C::SQL.delete_sessions, &[Arg::Texts(&ids)])
        .await
        .map_err(database(context))?;
    Ok(deleted)
}

/// Applies `edit` to session `id` as stored and writes it back when `edit` answers true, on a
/// connection inside a transaction the caller commits; answers the session as stored after,
/// `None` (and nothing written) when it is not stored.
pub(crate) async fn edit_session<C: Conn>(
    conn: &mut C,
    id: &SessionId,
    edit: super::SessionEdit,
    context: &str,
) -> Result<Option<Session>, StoreError> {
    let rows = conn
        .fetch(C::SQL.session_to_edit, &[Arg::Text(id.as_str())])
        .await
        .map_err(database(context))?;
    let Some(mut session) = rows.first().map(decode_session).transpose()? else {
        return Ok(None);
    };
    let stored_time = session.time.updated;
    if !edit(&mut session) {
        return Ok(Some(session));
    }
    let data = encode("session", id.as_str(), &session)?;
    let args = [
        Arg::Text(id.as_str()),
        Arg::MaybeText(session.parent_id.as_ref().map(SessionId::as_str)),
        Arg::Text(&session.project_id),
        Arg::Text(&session.title),
        Arg::Text(&fold_title(&session.title)),
        Arg::MaybeInt(Some(to_sql(session.time.created))),
        Arg::MaybeInt(Some(to_sql(session.time.updated))),
        Arg::Text(&data),
    ];
    conn.run(C::SQL.edit_session, &args)
        .await
        .map_err(database(context))?;
    session.time.updated = session.time.updated.max(stored_time);
    Ok(Some(session))
}

/// Deletes message `id` of `session`; its parts go with it.
pub(crate) async fn delete_message<C: Conn>(
    conn: &mut C,
    session: &str,
    id: &str,
    context: &str,
) -> Result<(), StoreError> {
    conn.run(C::SQL.delete_message, &[Arg::Text(id), Arg::Text(session)])
        .await
        .map(drop)
        .map_err(database(context))
}

/// Deletes part `id`.
pub(crate) async fn delete_part<C: Conn>(
    conn: &mut C,
    id: &str,
    context: &str,
) -> Result<(), StoreError> {
    conn.run(C::SQL.delete_part, &[Arg::Text(id)])
        .await
        .map(drop)
        .map_err(database(context))
}

/// Inserts or replaces the record of `task.child_id`.
pub(crate) async fn put_background<C: Conn>(
    conn: &mut C,
    task: &BackgroundTask,
    context: &str,
) -> Result<(), StoreError> {
    let data = encode("background task", task.child_id.as_str(), task)?;
    let args = [
        Arg::Text(task.child_id.as_str()),
        Arg::Text(task.parent_id.as_str()),
        Arg::Bool(task.delivered),
        Arg::MaybeInt(Some(to_sql(task.started))),
        Arg::Text(&data),
    ];
    conn.run(C::SQL.put_background, &args)
        .await
        .map(drop)
        .map_err(database(context))
}

/// Sets the owner of `child`'s undelivered record to `to` if it is still `from`; answers
/// whether it did. One statement: of several stores claiming at once, one changes the row.
pub(crate) async fn claim_background<C: Conn>(
    conn: &mut C,
    child: &SessionId,
    from: Option<&str>,
    to: &str,
    context: &str,
) -> Result<bool, StoreError> {
    let args = [
        Arg::Text(child.as_str()),
        Arg::MaybeText(from),
        Arg::Text(to),
    ];
    let changed = conn
        .run(C::SQL.claim_background, &args)
        .await
        .map_err(database(context))?;
    Ok(changed == 1)
}

/// Makes `to` the owner of the unfinished answers `from` owns (in `session` only, when given);
/// answers those it changed. One statement: of several stores claiming at once, each answer
/// goes to one of them.
pub(crate) async fn claim_unfinished<C: Conn>(
    conn: &mut C,
    from: &str,
    to: &str,
    session: Option<&SessionId>,
    context: &str,
) -> Result<Vec<Unfinished>, StoreError> {
    let args = [
        Arg::Text(from),
        Arg::Text(to),
        Arg::MaybeText(session.map(SessionId::as_str)),
    ];
    let rows = conn
        .fetch(C::SQL.claim_unfinished, &args)
        .await
        .map_err(database(context))?;
    rows.iter().map(decode_unfinished).collect()
}
