//! The write path the SQL stores share: a writer task that owns the write connection, the
//! queue of writes handed to it, and read-your-writes for the writes queued without waiting.
//!
//! Upserts of sessions, messages and parts queue up for the writer already encoded (the JSON of
//! `data` is made once, by the caller), and it commits whatever has queued up together (group
//! commit), all or none; when that fails, row by row, so that only the faulty rows report an
//! error. A caller that waits is answered after the commit, and since the queue is committed in
//! order, that also covers everything queued before. Writes queued without waiting are
//! read-your-writes: a read of their session waits for their commit (see `unflushed.rs`).
//! Other writes (deletes, todo lists, approvals, claims) run alone on the writer, in queue
//! order. When nothing is queued, an awaited write runs at once on the caller's task (and, where
//! the backend takes writes in line once sent, lets the connection go as soon as it is sent).
//!
//! What a backend supplies is a [`WriteConn`]: how a batch of upserts is committed, and one
//! upsert alone.
//!
//! - `jobs.rs`: what is queued; `writer.rs`: the writer task and its group commit;
//! - `upsert.rs`: a row to write; `unflushed.rs`: read-your-writes.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Part, Session};
use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::{OwnedMutexGuard, mpsc, oneshot};

use crate::store::StoreError;

mod jobs;
mod unflushed;
mod upsert;
mod writer;

pub(crate) use jobs::Job;
pub(crate) use unflushed::Unflushed;
pub(crate) use upsert::{Table, Upsert, fold_title, rows};
#[cfg(test)]
pub(crate) use writer::MAX_BATCH;

/// The connection a store's writer writes through.
pub(crate) trait WriteConn: Send + 'static {
    /// What a failed write says.
    type Error: std::fmt::Display + Send;

    /// Writes upserts all together, all or nothing: table by table, parents first (sessions,
    /// then messages, then parts, each in queue order, so that a later upsert of a row wins).
    fn write_all<'a>(
        &'a mut self,
        upserts: &'a [&'a Arc<Upsert>],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'a;

    /// Writes one upsert alone.
    fn write_one<'a>(
        &'a mut self,
        upsert: &'a Arc<Upsert>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'a;

    /// A second handle on this connection's upserts, for backends that take writes in the
    /// order they are sent: a write through it is in line (after every write sent before it,
    /// before every write sent after) from its first poll on.
    type Detached: WriteConn;

    /// A handle that writes upserts in line with this connection (see [`Self::Detached`]),
    /// or `None` when a write needs the connection itself until it is done.
    fn detached(&self) -> Option<Self::Detached>;
}

/// Writes upserts (`None` entries are barriers) all together, all or nothing; when that fails,
/// one by one, so that only the rows at fault report an error. Returns one result per entry.
pub(crate) async fn apply<C: WriteConn>(
    conn: &mut C,
    entries: Vec<Option<&Arc<Upsert>>>,
) -> Vec<Result<(), StoreError>> {
    let mut results: Vec<Result<(), StoreError>> = (0..entries.len()).map(|_| Ok(())).collect();
    let upserts: Vec<&Arc<Upsert>> = entries.iter().flatten().copied().collect();
    if upserts.is_empty() {
        return results;
    }
    let Err(error) = conn.write_all(&upserts).await else {
        return results;
    };
    if let [upsert] = upserts.as_slice() {
        if let Some(i) = entries.iter().position(Option::is_some) {
            results[i] = Err(upsert.failed(error));
        }
        return results;
    }
    // In the batch's order of application, so that a row whose parent is in the batch still
    // finds it.
    for table in Table::ALL {
        for (i, entry) in entries.iter().enumerate() {
            if let Some(upsert) = entry
                && upsert.table() == table
            {
                results[i] = conn.write_one(upsert).await.map_err(|e| upsert.failed(e));
            }
        }
    }
    results
}

/// Writes counted as pending while a write made at once is under way; uncounted when dropped.
struct Pending<'a> {
    count: &'a AtomicUsize,
    writes: usize,
}

impl<'a> Pending<'a> {
    /// Counts `writes` more in `count`.
    fn count(count: &'a AtomicUsize, writes: usize) -> Self {
        count.fetch_add(writes, Ordering::SeqCst);
        Pending { count, writes }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(self.writes, Ordering::SeqCst);
    }
}

/// The caller's side of a store's writer task.
pub(crate) struct WriteQueue<C: WriteConn> {
    /// Writes waiting for the writer task.
    queue: mpsc::UnboundedSender<Job<C>>,
    /// The write connection, shared by the writer task and the direct path.
    conn: Arc<AsyncMutex<C>>,
    /// Jobs queued and not yet done; while it is zero and the connection is free, a write runs
    /// at once on the caller's task instead of through the queue (two thread hops instead of
    /// four).
    pending: Arc<AtomicUsize>,
    /// Writes queued without waiting that reads must see (read-your-writes).
    pub(crate) unflushed: Arc<Unflushed>,
    /// The runtime writing through the store, once named: its unfinished answers carry its id.
    runtime: Arc<OnceLock<Arc<str>>>,
}

impl<C: WriteConn> Clone for WriteQueue<C> {
    fn clone(&self) -> Self {
        WriteQueue {
            queue: self.queue.clone(),
            conn: self.conn.clone(),
            pending: self.pending.clone(),
            unflushed: self.unflushed.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<C: WriteConn> std::fmt::Debug for WriteQueue<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteQueue")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Each row as an upsert whose commit is answered, and the answers, in order.
fn answered(
    rows: Vec<Arc<Upsert>>,
) -> (
    Vec<jobs::Batched>,
    Vec<oneshot::Receiver<Result<(), StoreError>>>,
) {
    rows.into_iter()
        .map(|upsert| {
            let (tx, rx) = oneshot::channel();
            let job = jobs::Batched {
                upsert: Some(upsert),
                done: Some(tx),
            };
            (job, rx)
        })
        .unzip()
}

/// Waits for every answer; the first failure, if any.
async fn all_committed(
    answers: Vec<oneshot::Receiver<Result<(), StoreError>>>,
) -> Result<(), StoreError> {
    for answer in answers {
        answer.await.unwrap_or_else(|_| Err(writer_stopped()))?;
    }
    Ok(())
}

/// The error of a write whose waiter was dropped: the writer task stopped before answering.
fn writer_stopped() -> StoreError {
    StoreError::Database("the writer stopped".into())
}

impl<C: WriteConn> WriteQueue<C> {
    /// Starts the writer task on `conn`.
    pub(crate) fn start(conn: C) -> WriteQueue<C> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let conn = Arc::new(AsyncMutex::new(conn));
        let pending = Arc::new(AtomicUsize::new(0));
        let unflushed = Arc::new(Unflushed::default());
        tokio::spawn(writer::write_batches(
            conn.clone(),
            pending.clone(),
            unflushed.clone(),
            jobs,
        ));
        WriteQueue {
            queue,
            conn,
            pending,
            unflushed,
            runtime: Arc::default(),
        }
    }

    /// A handle that does not keep the writer alive; it fails to upgrade once the store is
    /// dropped.
    pub(crate) fn downgrade(&self) -> mpsc::WeakUnboundedSender<Job<C>> {
        self.queue.downgrade()
    }

    /// The runtime writing through the store, once named.
    pub(crate) fn runtime(&self) -> Option<&Arc<str>> {
        self.runtime.get()
    }

    /// Names the runtime writing through the store (the first name sticks).
    pub(crate) fn set_runtime(&self, runtime: &str) {
        let _ = self.runtime.set(Arc::from(runtime));
    }

    /// Hands a job to the writer task, counting its writes as pending; answers the job's
    /// sequence number (see `unflushed.rs`).
    fn send(&self, job: Job<C>) -> Result<u64, StoreError> {
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
    fn direct(&self) -> Option<OwnedMutexGuard<C>> {
        if self.pending.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let guard = self.conn.clone().try_lock_owned().ok()?;
        (self.pending.load(Ordering::SeqCst) == 0).then_some(guard)
    }

    /// Writes `entries` (see [`apply`]) through the write connection taken by [`direct`]
    /// (`conn`). A backend whose writes are in line once sent lets the connection go as soon
    /// as they are: the caller's thread may be busy with other tasks for a while before it
    /// polls this again, and the writer task must not wait for it meanwhile. The write counts
    /// as pending until it is done, so that writes meanwhile are committed together by the
    /// writer rather than each alone at once.
    async fn write_direct(
        &self,
        conn: OwnedMutexGuard<C>,
        entries: Vec<Option<&Arc<Upsert>>>,
    ) -> Vec<Result<(), StoreError>> {
        let Some(mut handle) = conn.detached() else {
            let mut conn = conn;
            return apply(&mut *conn, entries).await;
        };
        let _pending = Pending::count(&self.pending, entries.len());
        let mut writing = std::pin::pin!(apply(&mut handle, entries));
        let first = futures::poll!(writing.as_mut());
        drop(conn);
        match first {
            std::task::Poll::Ready(results) => results,
            std::task::Poll::Pending => writing.await,
        }
    }

    /// How many writes are pending (queued, or made at once and under way).
    #[cfg(test)]
    pub(crate) fn writes_pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Writes an upsert and waits for its commit.
    pub(crate) async fn submit(&self, upsert: Upsert) -> Result<(), StoreError> {
        let upsert = Arc::new(upsert);
        if let Some(conn) = self.direct() {
            let results = self.write_direct(conn, vec![Some(&upsert)]).await;
            return results.into_iter().collect();
        }
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(jobs::Batched {
            upsert: Some(upsert),
            done: Some(tx),
        });
        self.send(job)?;
        rx.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Writes rows together and waits for their commit: one transaction, one commit.
    pub(crate) async fn submit_many(&self, rows: Vec<Upsert>) -> Result<(), StoreError> {
        let rows: Vec<Arc<Upsert>> = rows.into_iter().map(Arc::new).collect();
        if let Some(conn) = self.direct() {
            let results = self
                .write_direct(conn, rows.iter().map(Some).collect())
                .await;
            return results.into_iter().collect();
        }
        let (jobs, answers) = answered(rows);
        // One job, so the rows share a batch: one transaction, one commit.
        self.send(Job::Many(jobs))?;
        all_committed(answers).await
    }

    /// Like [`submit_many`](Self::submit_many) for sessions, messages and parts (stored in that
    /// order), but the writer may hold them back for the burst of writes they belong to, until
    /// [`hurry`](Self::hurry) asks for them. With nothing pending and the connection free, they
    /// are written at once here; otherwise, while the writer waits for writes or collects a
    /// burst, it encodes them itself (in time it would spend waiting, and the caller goes on
    /// sooner), and while it commits, the caller encodes them (the writer is busy enough).
    pub(crate) async fn submit_patiently(
        &self,
        sessions: Vec<Arc<Session>>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    ) -> Result<(), StoreError> {
        if let Some(conn) = self.direct() {
            let rows = upsert::shared_rows(&sessions, &messages, &parts, self.runtime())?;
            let results = self
                .write_direct(conn, rows.iter().map(Some).collect())
                .await;
            return results.into_iter().collect();
        }
        let (job, answers) = if self.unflushed.collecting() {
            let count = sessions.len() + messages.len() + parts.len();
            let (waiting, answers) = (0..count).map(|_| oneshot::channel()).unzip();
            let values = jobs::Values {
                sessions,
                messages,
                parts,
                runtime: self.runtime.get().cloned(),
                waiting: Some(waiting),
            };
            (Job::Values(Box::new(values)), answers)
        } else {
            let rows = upsert::shared_rows(&sessions, &messages, &parts, self.runtime())?;
            let (jobs, answers) = answered(rows);
            (Job::Patient(jobs), answers)
        };
        // One job, so the rows share a batch: one transaction, one commit.
        self.send(job)?;
        all_committed(answers).await
    }

    /// Asks the writer to commit what it holds back now.
    pub(crate) fn hurry(&self) {
        self.unflushed.hurry();
    }

    /// Sends rows as one job, after everything queued before, without waiting: reads of their
    /// sessions wait for them from now on, and every job sent later is committed after them.
    /// Answers their commit, to be awaited or not.
    pub(crate) fn send_ahead(
        &self,
        rows: Vec<Upsert>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let mut sessions: Vec<String> = Vec::with_capacity(1);
        for upsert in &rows {
            // Rows of a session come in runs: each run's session once.
            if sessions.last().map(String::as_str) != Some(upsert.session()) {
                sessions.push(upsert.session().to_string());
            }
        }
        let (jobs, answers) = answered(rows.into_iter().map(Arc::new).collect());
        let sent = self.send(Job::Ahead(jobs));
        if let Ok(seq) = sent {
            self.unflushed
                .behind(seq, sessions.iter().map(String::as_str));
        }
        async move {
            sent?;
            all_committed(answers).await
        }
    }

    /// Moves each session's update time forward to its time with the writer's next batch and
    /// waits for its commit; answers the sessions' ids, for reading them back.
    pub(crate) async fn touch(
        &self,
        touches: &[(SessionId, u64)],
    ) -> Result<Vec<String>, StoreError> {
        self.submit_many(Upsert::touches(touches)).await?;
        Ok(touches.iter().map(|(id, _)| id.to_string()).collect())
    }

    /// Waits until every upsert queued so far is committed.
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Batched(jobs::Batched {
            upsert: None,
            done: Some(tx),
        });
        self.send(job)?;
        rx.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Runs `work` on the write connection alone, after every write queued before it.
    pub(crate) async fn exclusive<T: Send + 'static>(
        &self,
        context: String,
        work: impl for<'c> FnOnce(&'c mut C) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
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
    pub(crate) fn enqueue(&self, upsert: Result<Upsert, StoreError>) {
        match upsert {
            Ok(upsert) => {
                let session = upsert.session().to_string();
                let job = Job::Batched(jobs::Batched {
                    upsert: Some(Arc::new(upsert)),
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

    /// Queues a part without waiting. While the writer waits for writes or collects a burst, it
    /// encodes the part itself (in time it would spend waiting: a fan-out's calls queue their
    /// running parts while the store holds their burst); while it commits, the part is encoded
    /// here (the writer is busy enough).
    pub(crate) fn enqueue_part(&self, part: Arc<Part>) {
        if self.unflushed.collecting() {
            self.enqueue_values(Vec::new(), Vec::new(), vec![part]);
        } else {
            self.enqueue(Upsert::of_part(&part));
        }
    }

    /// Queues sessions, messages and parts without waiting, to be encoded by the writer and
    /// committed together; a failure to queue them is logged.
    pub(crate) fn enqueue_values(
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
        let values = jobs::Values {
            sessions: sessions.into_iter().map(Arc::new).collect(),
            messages,
            parts,
            runtime: self.runtime.get().cloned(),
            waiting: None,
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
