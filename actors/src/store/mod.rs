//! Persistence of sessions, messages, parts, todos and "always" permission approvals behind the
//! `Store` trait.
//!
//! The embedded default is SQLite ([`SqliteStore`]) in `taskforce.db` in the data directory;
//! several runtimes can share one PostgreSQL database instead ([`PostgresStore`], `[store] url`).

mod background;
mod migrations;
mod open;
mod postgres;
mod queries;
mod rows;
mod sqlite;
mod write;
mod written;

pub use background::BackgroundTask;
pub use open::{open_store, store_location};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database failed (I/O, locking, corruption). Retryable only if the cause was transient.
    #[error("database error: {0}")]
    Database(String),
    /// A stored row does not decode into the domain model (written by an incompatible version).
    #[error("stored {what} {id} is unreadable: {message}")]
    Corrupt {
        /// `session`, `message`, `part`, `todo`, `approval` or `background task`.
        what: &'static str,
        /// The row's id.
        id: String,
        /// The decoding error.
        message: String,
    },
    /// The migrations could not be applied.
    #[error("cannot prepare the database at {path}: {message}")]
    Open {
        /// The database file, or the server and database (without the password).
        path: String,
        /// What failed.
        message: String,
    },
    /// The configured address of the store is not one it can use.
    #[error("bad `[store] url`: {message}")]
    Address {
        /// What is wrong with it (without the password).
        message: String,
    },
}

/// A message with its parts, in OpenCode's `{info, parts}` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageWithParts {
    /// The message.
    // Shared with the events and writes that carry it.
    #[cfg_attr(feature = "openapi", schema(value_type = Message))]
    pub info: Arc<Message>,
    /// Its parts, ordered by id.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Part>))]
    pub parts: Vec<Arc<Part>>,
}

impl MessageWithParts {
    /// Whether this is an answer (assistant message) created at or after `since` (epoch ms).
    pub fn is_answer_since(&self, since: u64) -> bool {
        matches!(&*self.info, Message::Assistant(a) if a.time.created >= since)
    }
}

/// An "always" approval of a project: `permission` is allowed for every value matching the
/// wildcard `pattern`, in every session of the project, until it is removed from the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The permission approved (`bash`, `edit`, …).
    pub permission: String,
    /// The wildcard pattern approved (`git status *`, `*`, …).
    pub pattern: String,
    /// When it was approved (epoch ms).
    pub created: u64,
}

/// An answer (assistant message) that is not finished, and the runtime writing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// The session it is in.
    pub session: SessionId,
    /// The message.
    pub message: MessageId,
    /// The id of the runtime writing it; empty when it names none (written by an earlier
    /// version, or by a store no runtime was named for).
    pub owner: String,
}

/// What [`Store::count_tree_child`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeCount {
    /// The child is counted.
    Counted,
    /// The tree has created `created` children, the limit: nothing counted.
    Full {
        /// How many children the tree created.
        created: usize,
    },
    /// The store has no count of this tree yet: ask again with its stored descendants.
    Unseeded,
    /// This store keeps no count.
    NotKept,
}

/// A session of a tree as [`Store::tree`] reads it: the session and its messages, without
/// their parts.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeSession {
    /// The session.
    pub session: Session,
    /// Its messages, in the order they were created.
    pub messages: Vec<Arc<Message>>,
}

/// Which sessions to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFilter {
    /// Only sessions without a parent.
    pub roots: bool,
    /// Only sessions updated at or after this time (epoch ms).
    pub start: Option<u64>,
    /// Only sessions whose title contains this text, case-insensitively.
    pub search: Option<String>,
    /// At most this many sessions.
    pub limit: Option<usize>,
    /// Only sessions of this project (a runtime's [`project_id`](crate::Runtime::project_id)).
    pub project_id: Option<String>,
}

/// The commit of writes handed to a store without waiting (see [`Store::put_many_ahead`]).
pub type Committing =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), StoreError>> + Send + 'static>>;

/// An edit of a stored session: changes it and answers whether to write it back.
pub type SessionEdit = Box<dyn FnOnce(&mut Session) -> bool + Send>;

/// Persistence of the domain model. Writes are upserts keyed by id.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Inserts or replaces a session.
    async fn put_session(&self, session: &Session) -> Result<(), StoreError>;
    /// The session with this id.
    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError>;
    /// Applies `edit` to the session as stored and writes it back when `edit` answers true,
    /// with no other write of it between the read and the write; never brings back a session
    /// that is not stored (deleted meanwhile). Answers the session as stored after, `None` when
    /// it is not stored. Stores that cannot edit in place read and write (a delete may then come
    /// between).
    async fn update_session(
        &self,
        id: &SessionId,
        edit: SessionEdit,
    ) -> Result<Option<Session>, StoreError> {
        let Some(mut session) = self.session(id).await? else {
            return Ok(None);
        };
        if edit(&mut session) {
            self.put_session(&session).await?;
            return self.session(id).await;
        }
        Ok(Some(session))
    }
    /// Moves each session's `time.updated` forward to its time (never back), keeping what
    /// else was stored; answers the sessions as stored after (sessions not stored are left
    /// out). Stores that cannot update in place read and write each session.
    async fn touch_sessions(
        &self,
        touches: Vec<(SessionId, u64)>,
    ) -> Result<Vec<Session>, StoreError> {
        let mut out = Vec::with_capacity(touches.len());
        for (id, at) in touches {
            if let Some(mut session) = self.session(&id).await? {
                if session.time.updated < at {
                    session.time.updated = at;
                    self.put_session(&session).await?;
                }
                out.push(session);
            }
        }
        Ok(out)
    }
    /// Sessions matching `filter`, most recently updated first.
    async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError>;
    /// The direct children of a session, oldest first.
    async fn children(&self, id: &SessionId) -> Result<Vec<Session>, StoreError>;
    /// Every session of `root`'s tree, `root` first and each session before its children
    /// (siblings oldest first), each with its messages in order but without their parts; empty
    /// when `root` is not stored. Stores that cannot read a tree at once read it session by
    /// session.
    async fn tree(&self, root: &SessionId) -> Result<Vec<TreeSession>, StoreError> {
        let Some(first) = self.session(root).await? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut queue = std::collections::VecDeque::from([first]);
        while let Some(session) = queue.pop_front() {
            queue.extend(self.children(&session.id).await?);
            let messages = self.messages(&session.id).await?;
            out.push(TreeSession {
                session,
                messages: messages.into_iter().map(|m| m.info).collect(),
            });
        }
        Ok(out)
    }
    /// Deletes a session and its whole subtree with their messages, parts and todos; returns the
    /// deleted sessions, descendants before their ancestors.
    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError>;
    /// Inserts or replaces a message (without its parts).
    async fn put_message(&self, message: &Message) -> Result<(), StoreError>;
    /// Queues an insert-or-replace of a message that is still changing, without waiting for it;
    /// later writes of the same message land after it. A failure is logged.
    fn queue_message(&self, message: &Message);
    /// One message with its parts.
    async fn message(
        &self,
        session: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError>;
    /// Every message of a session with its parts, oldest first.
    async fn messages(&self, session: &SessionId) -> Result<Vec<MessageWithParts>, StoreError>;
    /// Deletes a message and its parts.
    async fn remove_message(&self, session: &SessionId, id: &MessageId) -> Result<(), StoreError>;
    /// Inserts or replaces a part.
    async fn put_part(&self, part: &Part) -> Result<(), StoreError>;
    /// Inserts or replaces sessions, messages and parts together (in that order); returns once
    /// all are stored. The default writes them one by one.
    async fn put_many(
        &self,
        sessions: &[&Session],
        messages: &[&Message],
        parts: &[&Part],
    ) -> Result<(), StoreError> {
        for s in sessions {
            self.put_session(s).await?;
        }
        for m in messages {
            self.put_message(m).await?;
        }
        for p in parts {
            self.put_part(p).await?;
        }
        Ok(())
    }
    /// Queues an insert-or-replace of a part that is still changing, without waiting for it;
    /// later writes of the same part land after it. A failure is logged.
    fn queue_part(&self, part: Arc<Part>);
    /// Like [`put_many`](Self::put_many), but the commit may wait for the burst of writes it
    /// belongs to, until [`hurry`](Self::hurry) asks for it, and the values may be encoded by
    /// the store's writer rather than the caller. The default is `put_many`.
    async fn put_many_patiently(
        &self,
        sessions: Vec<Arc<Session>>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    ) -> Result<(), StoreError> {
        let sessions: Vec<&Session> = sessions.iter().map(|s| &**s).collect();
        let messages: Vec<&Message> = messages.iter().map(|m| &**m).collect();
        let parts: Vec<&Part> = parts.iter().map(|p| &**p).collect();
        self.put_many(&sessions, &messages, &parts).await
    }
    /// Asks for the writes held back by [`put_many_patiently`](Self::put_many_patiently) to be
    /// committed now. The default holds nothing back.
    fn hurry(&self) {}
    /// Hands messages and parts to the writer to be stored together (messages first), after
    /// every write handed over before and before every write handed over later, without
    /// waiting: reads of their sessions made after this call see them. Answers their commit.
    fn put_many_ahead(&self, messages: &[&Message], parts: &[&Part]) -> Committing;
    /// Queues sessions, messages and parts to be stored together (in that order) without
    /// waiting; reads of their sessions made after this call see them. A failure is logged.
    fn queue_many(
        &self,
        sessions: Vec<Session>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    );
    /// Deletes a part.
    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError>;
    /// The session's todo list, in order.
    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, StoreError>;
    /// Replaces the session's todo list.
    async fn put_todos(&self, session: &SessionId, todos: &[Todo]) -> Result<(), StoreError>;
    /// The "always" approvals of `project` (its id, as sessions carry it), oldest first.
    async fn approvals(&self, project: &str) -> Result<Vec<Approval>, StoreError>;
    /// Adds "always" approvals to `project`; returns once they are stored. An approval already
    /// stored (same permission and pattern) keeps its first time.
    async fn add_approvals(&self, project: &str, approvals: &[Approval]) -> Result<(), StoreError>;
    /// Inserts or replaces the record of a background child; returns once it is stored. The
    /// default (a store without background support) refuses.
    async fn put_background(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        Err(StoreError::Database(format!(
            "this store cannot keep background task {}",
            task.child_id
        )))
    }
    /// The record of `child`, if it ran in the background.
    async fn background(&self, _child: &SessionId) -> Result<Option<BackgroundTask>, StoreError> {
        Ok(None)
    }
    /// Every background record whose result is not delivered yet, oldest first.
    async fn undelivered_background(&self) -> Result<Vec<BackgroundTask>, StoreError> {
        Ok(Vec::new())
    }
    /// Makes runtime `to` the owner of `child`'s undelivered record if its owner is still
    /// `from` (`None`: no owner); answers whether it did. Of several runtimes taking over the
    /// same record at once, exactly one does.
    async fn claim_background(
        &self,
        _child: &SessionId,
        _from: Option<&str>,
        _to: &str,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// Counts one more child created in the tree of `root` when it has created fewer than
    /// `limit`, for stores several runtimes share (the count is then the same for all of
    /// them). `seed` starts a tree the store has no count of yet (its stored descendants);
    /// without one such a tree answers [`TreeCount::Unseeded`]. Stores no other machine
    /// shares keep no count ([`TreeCount::NotKept`]: the runtime counts in memory).
    async fn count_tree_child(
        &self,
        _root: &SessionId,
        _seed: Option<usize>,
        _limit: usize,
    ) -> Result<TreeCount, StoreError> {
        Ok(TreeCount::NotKept)
    }
    /// Takes back one child counted in the tree of `root` (it was not created after all).
    async fn uncount_tree_child(&self, _root: &SessionId) -> Result<(), StoreError> {
        Ok(())
    }
    /// The store's link to its server in a few words (`connected`, or since when it is not
    /// and how often it was lost), for a node's status; `None` for a store with no server.
    fn link(&self) -> Option<String> {
        None
    }
    /// Whether runtimes on other machines may share this store (a database server): a
    /// cluster places child runs on other nodes only through such a store, since the calling
    /// node reads their answers from it.
    fn is_shared(&self) -> bool {
        false
    }
    /// Keeps runtime `runtime` known as alive to the runtimes on other machines sharing this
    /// store, for as long as this store lives in this process; an error means it cannot (and
    /// the runtime must not start, or others would take over its work). Stores used by one
    /// machine only need nothing: the lock files of their data directory tell.
    async fn hold_alive(&self, _runtime: &str) -> Result<(), StoreError> {
        Ok(())
    }
    /// Whether runtime `runtime` is alive, as far as this store can tell; `None` when it does
    /// not keep track (the lock files of the data directory tell).
    async fn is_alive(&self, _runtime: &str) -> Option<bool> {
        None
    }
    /// Waits until every write queued so far (without waiting) is stored.
    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Names the runtime writing through this store (the first name given sticks): answers
    /// stored unfinished are recorded as that runtime's, so that another runtime can tell the
    /// answers of a runtime that died from those of a live one. The default records nothing
    /// (and finds nothing to repair); a store wrapping another forwards this and the two
    /// methods below.
    fn set_runtime(&self, _runtime: &str) {}
    /// The unfinished answers of `session` (of every session when `None`), oldest first.
    async fn unfinished_answers(
        &self,
        _session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        Ok(Vec::new())
    }
    /// Makes runtime `to` the writer of the unfinished answers runtime `from` writes (in
    /// `session` only, when given); answers those it took. Of several runtimes taking over the
    /// same answers at once, one takes each.
    async fn claim_unfinished(
        &self,
        _from: &str,
        _to: &str,
        _session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        Ok(Vec::new())
    }
}
