//! [`Upsert`]: one row of a session, message or part to insert or replace, made from its domain
//! value with its column values ready to bind (the JSON of `data` is made once, here); or a
//! session's time moved forward, which commits with the rows beside it.

use std::sync::Arc;

use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Part, Session};

use crate::store::StoreError;
use crate::store::rows::{encode, to_sql};

/// The kinds of rows that upserts write, in the order a batch applies them (parents first,
/// then the sessions' times, so that a session stored in the batch is there to be touched).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Session,
    Message,
    Part,
    /// A session's `time_updated`, moved forward in place.
    Touch,
}

impl Table {
    /// Every kind, in the order of application.
    pub(crate) const ALL: [Table; 4] = [Table::Session, Table::Message, Table::Part, Table::Touch];
}

/// One row to insert or replace, with its bound values ready.
#[derive(Debug, Clone)]
pub(crate) enum Upsert {
    Session {
        id: String,
        parent: Option<String>,
        project: String,
        title: String,
        /// The title case-folded, for the `title_folded` column.
        folded: String,
        created: i64,
        updated: i64,
        data: String,
    },
    Message {
        id: String,
        session: String,
        created: i64,
        /// The runtime writing the message while it is an unfinished answer, else `None`.
        owner: Option<Arc<str>>,
        data: String,
    },
    Part {
        id: String,
        message: String,
        session: String,
        data: String,
    },
    /// Session `id`'s `time_updated` moved forward to `at` (never back), nothing else of its
    /// row rewritten; a session not stored is left alone.
    Touch { id: String, at: i64 },
}

/// A title as the `title_folded` column holds it, which searches compare case-insensitively.
pub(crate) fn fold_title(title: &str) -> String {
    title.to_lowercase()
}

impl Upsert {
    /// A session's row.
    pub(crate) fn of_session(session: &Session) -> Result<Upsert, StoreError> {
        let data = encode("session", session.id.as_str(), session)?;
        crate::store::written::written(session, &data);
        Ok(Upsert::Session {
            id: session.id.as_str().to_owned(),
            parent: session.parent_id.as_ref().map(ToString::to_string),
            project: session.project_id.clone(),
            title: session.title.clone(),
            folded: fold_title(&session.title),
            created: to_sql(session.time.created),
            updated: to_sql(session.time.updated),
            data,
        })
    }

    /// A message's row; an unfinished answer names the runtime writing it (`runtime`, else
    /// nobody: '').
    pub(crate) fn of_message(
        message: &Message,
        runtime: Option<&Arc<str>>,
    ) -> Result<Upsert, StoreError> {
        let id = message.id().as_str();
        let unfinished = message
            .as_assistant()
            .is_some_and(|a| a.time.completed.is_none());
        Ok(Upsert::Message {
            id: id.to_owned(),
            session: message.session_id().as_str().to_owned(),
            created: to_sql(message.created()),
            owner: unfinished.then(|| runtime.cloned().unwrap_or_else(|| Arc::from(""))),
            data: encode("message", id, message)?,
        })
    }

    /// A part's row.
    pub(crate) fn of_part(part: &Part) -> Result<Upsert, StoreError> {
        Ok(Upsert::Part {
            id: part.id.as_str().to_owned(),
            message: part.message_id.as_str().to_owned(),
            session: part.session_id.as_str().to_owned(),
            data: encode("part", part.id.as_str(), part)?,
        })
    }

    /// Session `id`'s time moved forward to `at`.
    pub(crate) fn touch(id: &SessionId, at: u64) -> Upsert {
        Upsert::Touch {
            id: id.to_string(),
            at: to_sql(at),
        }
    }

    /// Each session's time moved forward to its time.
    pub(crate) fn touches(touches: &[(SessionId, u64)]) -> Vec<Upsert> {
        touches
            .iter()
            .map(|(id, at)| Upsert::touch(id, *at))
            .collect()
    }

    /// The row's id.
    pub(crate) fn id(&self) -> &str {
        match self {
            Upsert::Session { id, .. }
            | Upsert::Message { id, .. }
            | Upsert::Part { id, .. }
            | Upsert::Touch { id, .. } => id,
        }
    }

    /// The session the row belongs to.
    pub(crate) fn session(&self) -> &str {
        match self {
            Upsert::Session { id, .. } | Upsert::Touch { id, .. } => id,
            Upsert::Message { session, .. } | Upsert::Part { session, .. } => session,
        }
    }

    /// What was being done, to prefix an error of this row with.
    pub(crate) fn context(&self) -> String {
        match self {
            Upsert::Session { id, .. } => format!("cannot store session {id}"),
            Upsert::Message { id, session, .. } => {
                format!("cannot store message {id} of session {session}")
            }
            Upsert::Part { id, message, .. } => {
                format!("cannot store part {id} of message {message}")
            }
            Upsert::Touch { id, .. } => format!("cannot update the time of session {id}"),
        }
    }

    /// The table the row goes to.
    pub(crate) fn table(&self) -> Table {
        match self {
            Upsert::Session { .. } => Table::Session,
            Upsert::Message { .. } => Table::Message,
            Upsert::Part { .. } => Table::Part,
            Upsert::Touch { .. } => Table::Touch,
        }
    }

    /// A [`StoreError`] for this row failing with `error`.
    pub(crate) fn failed(&self, error: impl std::fmt::Display) -> StoreError {
        StoreError::Database(format!("{}: {error}", self.context()))
    }
}

/// The rows of sessions, messages and parts, in that order; `runtime` is the one writing
/// through the store, when named.
pub(crate) fn rows(
    sessions: &[&Session],
    messages: &[&Message],
    parts: &[&Part],
    runtime: Option<&Arc<str>>,
) -> Result<Vec<Upsert>, StoreError> {
    let mut rows = Vec::with_capacity(sessions.len() + messages.len() + parts.len());
    for session in sessions {
        rows.push(Upsert::of_session(session)?);
    }
    for message in messages {
        rows.push(Upsert::of_message(message, runtime)?);
    }
    for part in parts {
        rows.push(Upsert::of_part(part)?);
    }
    Ok(rows)
}

/// Like [`rows`], for shared values, each row shared too.
pub(crate) fn shared_rows(
    sessions: &[Arc<Session>],
    messages: &[Arc<Message>],
    parts: &[Arc<Part>],
    runtime: Option<&Arc<str>>,
) -> Result<Vec<Arc<Upsert>>, StoreError> {
    let sessions: Vec<&Session> = sessions.iter().map(|s| &**s).collect();
    let messages: Vec<&Message> = messages.iter().map(|m| &**m).collect();
    let parts: Vec<&Part> = parts.iter().map(|p| &**p).collect();
    let rows = rows(&sessions, &messages, &parts, runtime)?;
    Ok(rows.into_iter().map(Arc::new).collect())
}
