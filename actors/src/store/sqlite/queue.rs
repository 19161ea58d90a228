//! Handing writes to the writer task, on the caller's side: an upsert awaited (committed with
//! its batch, or at once on the caller's task when nothing is queued), queued without waiting
//! (read-your-writes: see `unflushed.rs`), or an exclusive write run alone in queue order.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use sqlx::SqliteConnection;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Part, Session};
use tokio::sync::{OwnedMutexGuard, oneshot};

use crate::store::StoreError;

use super::SqliteStore;
use super::commit::apply;
use super::jobs::{Batched, Job, Values};
use super::statements::run_upsert;
use super::upsert::Upsert;

/// The error of a write whose waiter was dropped: the writer task stopped before answering.
fn writer_stopped() -> StoreError {
    StoreError::Database("the writer stopped".into())
}

impl SqliteStore {
    /// Hands a job to the writer task, counting its writes as pending; answers the job's
    /// sequence number (see `unflushed.rs`).
    fn send(&self, job: Job) -> Result<u64, StoreError> {
        let writes = job.writes();
        let urgent = job.urgent();
        self.pending.fetch_add(writes, Ordering::SeqCst);
        let seq = self
            .unflushed
            .send(|| self.queue.send(job).map_err(|refused| refused.0.closed()))
            .inspect_err(|_| {
                self.pending.fetch_sub(writes, Ordering::SeqCst);
            })?;
        if urgent {
            // The writer may be lingering over writes nobody waits for: this one is waited for.
            self.unflushed.hurry();
        }
        Ok(seq)
    }

    /// The write connection, when nothing is queued or being written: the caller may write at
    /// once, and its write is ordered after everything before it.
    fn direct(&self) -> Option<OwnedMutexGuard<SqliteConnection>> {
        if self.pending.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let guard = self.conn.clone().try_lock_owned().ok()?;
        (self.pending.load(Ordering::SeqCst) == 0).then_some(guard)
    }

    /// Writes an upsert and waits for its commit.
    pub(super) async fn submit(&self, upsert: Upsert) -> Result<(), StoreError> {
        if let Some(mut conn) = self.direct() {
            return run_upsert(&mut conn, &upsert)
                .await
                .map_err(|e| upsert.failed(e));
        }
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(Batched {
            upsert: Some(upsert),
            done: Some(tx),
        });
        self.send(job)?;
        rx.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Writes rows together and waits for their commit: one transaction, one commit.
    pub(super) async fn submit_many(&self, rows: Vec<Upsert>) -> Result<(), StoreError> {
        if let Some(mut conn) = self.direct() {
            let results = apply(&mut conn, rows.iter().map(Some)).await;
            return results.into_iter().collect();
        }
        let mut jobs = Vec::with_capacity(rows.len());
        let mut answers = Vec::with_capacity(rows.len());
        for upsert in rows {
            let (tx, rx) = oneshot::channel();
            jobs.push(Batched {
                upsert: Some(upsert),
                done: Some(tx),
            });
            answers.push(rx);
        }
        // One job, so the rows share a batch: one transaction, one commit.
        self.send(Job::Many(jobs))?;
        for answer in answers {
            answer.await.unwrap_or_else(|_| Err(writer_stopped()))?;
        }
        Ok(())
    }

    /// Waits until every upsert queued so far is committed.
    pub(super) async fn flush_queue(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(Batched {
            upsert: None,
            done: Some(tx),
        });
        self.send(job)?;
        rx.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Runs `work` on the write connection alone, after every write queued before it.
    pub(super) async fn exclusive<T: Send + 'static>(
        &self,
        context: String,
        work: impl for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
        + Send
        + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Exclusive(Box::new(move |conn| {
            Box::pin(async move {
                let _ = tx.send(work(conn).await);
            })
        }));
        self.send(job)
            .map_err(|e| StoreError::Database(format!("{context}: {e}")))?;
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Database(format!(
                "{context}: the writer stopped"
            )))
        })
    }

    /// Queues an upsert without waiting; a failure to build or queue it is logged.
    pub(super) fn enqueue(&self, upsert: Result<Upsert, StoreError>) {
        match upsert {
            Ok(upsert) => {
                let session = upsert.session().to_string();
                let job = Job::Batched(Batched {
                    upsert: Some(upsert),
                    done: None,
                });
                match self.send(job) {
                    Ok(seq) => self.unflushed.behind(seq, [session.as_str()]),
                    Err(_) => tracing::warn!("the store is closed; an update was dropped"),
                }
            }
            Err(e) => tracing::warn!("cannot queue a write: {e}"),
        }
    }

    /// Queues sessions, messages and parts without waiting, to be encoded by the writer and
    /// committed together; a failure to queue them is logged.
    pub(super) fn enqueue_values(
        &self,
        sessions: Vec<Session>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    ) {
        // The sessions written, each run of rows of one session once (copies of their ids
        // share the text).
        let mut written: Vec<SessionId> = Vec::with_capacity(1);
        let ids = sessions
            .iter()
            .map(|s| &s.id)
            .chain(messages.iter().map(|m| m.session_id()))
            .chain(parts.iter().map(|p| &p.session_id));
        for session in ids {
            if written.last() != Some(session) {
                written.push(session.clone());
            }
        }
        let values = Values {
            sessions,
            messages,
            parts,
            runtime: self.runtime.get().cloned(),
        };
        // One job, so the rows share a batch: one transaction, one commit; encoded by the
        // writer, not here.
        match self.send(Job::Values(Box::new(values))) {
            Ok(seq) => self
                .unflushed
                .behind(seq, written.iter().map(SessionId::as_str)),
            Err(_) => tracing::warn!("the store is closed; an update was dropped"),
        }
    }
}
