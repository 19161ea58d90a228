//! What callers queue for the writer task: [`Job`]s, each an upsert to commit with its batch,
//! several upserts sure to share one, domain values to encode and commit, or a write that
//! needs the connection to itself.

use std::sync::Arc;

use futures::future::BoxFuture;
use taskforce_agents::model::{Message, Part, Session};
use tokio::sync::oneshot;

use crate::store::StoreError;

use super::upsert::Upsert;

/// A write that needs the connection to itself (its own transaction); it answers by itself.
pub(crate) type Exclusive<C> =
    Box<dyn for<'c> FnOnce(&'c mut C) -> BoxFuture<'c, ()> + Send + 'static>;

/// An upsert (or, without one, a barrier) committed with its batch; `done` hears of it.
#[derive(Debug)]
pub(crate) struct Batched {
    pub upsert: Option<Arc<Upsert>>,
    pub done: Option<oneshot::Sender<Result<(), StoreError>>>,
}

/// A queued write for the writer task, which writes through a `C`.
pub(crate) enum Job<C> {
    /// Committed with the other upserts queued beside it.
    Batched(Batched),
    /// Several upserts that are sure to share a batch.
    Many(Vec<Batched>),
    /// Like `Many`, but its waiter does not need it at once: the writer may linger over it for
    /// the burst it belongs to, until somebody asks for the writes (`Unflushed::hurry`).
    Patient(Vec<Batched>),
    /// Like `Many`, sent ahead of its sender's wait (see `WriteQueue::send_ahead`): reads of
    /// its sessions wait for it until it is committed.
    Ahead(Vec<Batched>),
    /// Run alone, after the batch before it is committed.
    Exclusive(Exclusive<C>),
    /// Sessions, messages and parts, encoded by the writer when it takes them (so that the
    /// caller does not spend the time), then committed like `Many`; like `Patient` when
    /// somebody waits for them.
    Values(Box<Values>),
}

/// Domain values queued to be stored together, sessions first, then messages, then parts.
#[derive(Debug, Default)]
pub(crate) struct Values {
    pub sessions: Vec<Arc<Session>>,
    pub messages: Vec<Arc<Message>>,
    pub parts: Vec<Arc<Part>>,
    /// The runtime writing through the store, when named (see `Store::set_runtime`).
    pub runtime: Option<Arc<str>>,
    /// Who hears of each value's row, in the same order, when somebody waits for them.
    pub waiting: Option<Vec<oneshot::Sender<Result<(), StoreError>>>>,
}

impl Values {
    /// How many rows they make.
    pub fn len(&self) -> usize {
        self.sessions.len() + self.messages.len() + self.parts.len()
    }

    /// Their rows, ready to commit; a value that cannot be encoded is left out, told to its
    /// waiter or, when nobody waits, logged.
    pub(super) fn into_batched(self) -> Vec<Batched> {
        let Values {
            sessions,
            messages,
            parts,
            runtime,
            waiting,
        } = self;
        let rows = sessions
            .iter()
            .map(|s| Upsert::of_session(s))
            .chain(
                messages
                    .iter()
                    .map(|m| Upsert::of_message(m, runtime.as_ref())),
            )
            .chain(parts.iter().map(|p| Upsert::of_part(p)));
        let mut waiting = waiting.map(Vec::into_iter);
        let mut batched = Vec::with_capacity(sessions.len() + messages.len() + parts.len());
        for row in rows {
            let done = waiting.as_mut().and_then(Iterator::next);
            match (row, done) {
                (Ok(row), done) => batched.push(Batched {
                    upsert: Some(Arc::new(row)),
                    done,
                }),
                (Err(e), Some(done)) => {
                    let _ = done.send(Err(e));
                }
                (Err(e), None) => tracing::warn!("a queued write was dropped: {e}"),
            }
        }
        batched
    }
}

/// Why a job was refused: the writer task is gone.
const CLOSED: &str = "the store is closed";

impl<C> Job<C> {
    /// How many writes the job counts for while it is pending.
    pub(super) fn writes(&self) -> usize {
        match self {
            Job::Batched(_) | Job::Exclusive(_) => 1,
            Job::Many(v) | Job::Patient(v) | Job::Ahead(v) => v.len(),
            Job::Values(v) => v.len(),
        }
    }

    /// Somebody waits for this job: it is committed without lingering.
    pub(super) fn urgent(&self) -> bool {
        match self {
            Job::Exclusive(_) => true,
            Job::Batched(b) => b.done.is_some(),
            Job::Many(v) | Job::Ahead(v) => v.iter().any(|b| b.done.is_some()),
            Job::Patient(_) | Job::Values(_) => false,
        }
    }

    /// Somebody waits for this job, but not at once (see `Job::Patient`).
    pub(super) fn patient(&self) -> bool {
        match self {
            Job::Patient(_) => true,
            Job::Values(v) => v.waiting.is_some(),
            _ => false,
        }
    }

    /// The error for this job refused by a closed store.
    pub(super) fn closed(self) -> StoreError {
        match self {
            Job::Batched(Batched {
                upsert: Some(upsert),
                ..
            }) => StoreError::Database(format!("{}: {CLOSED}", upsert.context())),
            _ => StoreError::Database(CLOSED.into()),
        }
    }
}

impl<C> std::fmt::Debug for Job<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Batched(Batched { upsert: None, .. }) => f.write_str("Batched(barrier)"),
            Job::Batched(Batched {
                upsert: Some(u), ..
            }) => write!(f, "Batched({:?} of session {})", u.table(), u.session()),
            Job::Many(v) => write!(f, "Many({})", v.len()),
            Job::Patient(v) => write!(f, "Patient({})", v.len()),
            Job::Ahead(v) => write!(f, "Ahead({})", v.len()),
            Job::Exclusive(_) => f.write_str("Exclusive"),
            Job::Values(v) => write!(f, "Values({})", v.len()),
        }
    }
}
