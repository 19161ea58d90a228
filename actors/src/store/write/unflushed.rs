//! Read-your-writes for writes queued without waiting: which sessions have such writes still
//! queued, so that a read of them waits for their commit instead of seeing an older state.
//!
//! Every job sent to the writer gets the next sequence number (numbers follow queue order);
//! the writer reports how far it has committed. A write queued without waiting records its
//! session's newest number; a read of that session waits until the writer has passed it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use dashmap::DashMap;
use tokio::sync::{Notify, watch};

/// The writer's progress and the sessions with queued, uncommitted writes.
#[derive(Debug)]
pub(crate) struct Unflushed {
    /// The number of the last job sent; held while sending so numbers follow queue order.
    sent: Mutex<u64>,
    /// The number of the last job committed (or run).
    committed: watch::Sender<u64>,
    /// Per session, the number of its newest write queued without waiting.
    sessions: DashMap<String, u64, foldhash::fast::RandomState>,
    /// The number of the newest write queued without waiting, of any session.
    newest: AtomicU64,
    /// A read is waiting: the writer should stop lingering.
    hurry: Notify,
    /// The writer is waiting for writes or collecting a burst of them, not committing.
    collecting: AtomicBool,
}

impl Default for Unflushed {
    fn default() -> Self {
        Unflushed {
            sent: Mutex::new(0),
            committed: watch::Sender::new(0),
            sessions: DashMap::default(),
            newest: AtomicU64::new(0),
            hurry: Notify::new(),
            collecting: AtomicBool::new(true),
        }
    }
}

impl Unflushed {
    /// Runs `send` under the next sequence number and returns that number when it succeeds.
    pub fn send<E>(&self, send: impl FnOnce() -> Result<(), E>) -> Result<u64, E> {
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        send()?;
        *sent += 1;
        Ok(*sent)
    }

    /// Records that job `seq`, queued without waiting, writes rows of `sessions`.
    pub fn behind<'a>(&self, seq: u64, sessions: impl IntoIterator<Item = &'a str>) {
        for session in sessions {
            if let Some(mut newest) = self.sessions.get_mut(session) {
                *newest = (*newest).max(seq);
            } else {
                self.sessions
                    .entry(session.to_string())
                    .and_modify(|s| *s = (*s).max(seq))
                    .or_insert(seq);
            }
        }
        self.newest.fetch_max(seq, Ordering::SeqCst);
    }

    /// The writer has committed every job up to `seq`; `sessions` are those it wrote without a
    /// waiter, whose entries are dropped once nothing newer of theirs is queued.
    pub fn committed<'a>(&self, seq: u64, sessions: impl IntoIterator<Item = &'a str>) {
        self.committed.send_replace(seq);
        for session in sessions {
            self.sessions.remove_if(session, |_, newest| *newest <= seq);
        }
    }

    /// Waits until every write of `session` queued without waiting so far is committed.
    pub async fn settled(&self, session: &str) {
        let target = self.sessions.get(session).map(|s| *s);
        if let Some(target) = target {
            self.reach(target).await;
        }
    }

    /// Waits until every write queued without waiting so far, of any session, is committed.
    pub async fn all_settled(&self) {
        self.reach(self.newest.load(Ordering::SeqCst)).await;
    }

    /// Asks the writer to commit what it holds now instead of lingering for more.
    pub fn hurry(&self) {
        self.hurry.notify_one();
    }

    /// Resolves when the queued writes are asked for.
    pub async fn hurried(&self) {
        self.hurry.notified().await;
    }

    /// Records whether the writer is waiting for writes or collecting a burst of them (`true`)
    /// or committing (`false`).
    pub fn set_collecting(&self, collecting: bool) {
        self.collecting.store(collecting, Ordering::Relaxed);
    }

    /// Whether the writer is waiting for writes or collecting a burst of them: work handed to
    /// it now is done before it commits, in time it would otherwise spend waiting.
    pub fn collecting(&self) -> bool {
        self.collecting.load(Ordering::Relaxed)
    }

    async fn reach(&self, target: u64) {
        if *self.committed.borrow() >= target {
            return;
        }
        let mut progress = self.committed.subscribe();
        // The writer may be lingering for more writes: this read wants them now.
        self.hurry();
        // An error means the writer is gone: nothing more will commit, so do not wait.
        let _ = progress.wait_for(|c| *c >= target).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_read_waits_only_for_its_own_sessions_writes() {
        let unflushed = Unflushed::default();
        let first = unflushed.send(|| Ok::<(), ()>(())).unwrap();
        unflushed.behind(first, ["ses_a"]);
        let second = unflushed.send(|| Ok::<(), ()>(())).unwrap();
        unflushed.behind(second, ["ses_b"]);
        assert_eq!((first, second), (1, 2));

        // Nothing of ses_c is queued: no wait.
        tokio::time::timeout(Duration::from_millis(50), unflushed.settled("ses_c"))
            .await
            .expect("no wait for a session without queued writes");
        // ses_a waits for job 1.
        let waiting = tokio::time::timeout(Duration::from_millis(20), unflushed.settled("ses_a"));
        assert!(waiting.await.is_err(), "ses_a has a queued write");
        unflushed.committed(1, ["ses_a"]);
        tokio::time::timeout(Duration::from_millis(50), unflushed.settled("ses_a"))
            .await
            .expect("job 1 is committed");
        // The global barrier still waits for job 2.
        let waiting = tokio::time::timeout(Duration::from_millis(20), unflushed.all_settled());
        assert!(waiting.await.is_err(), "job 2 is queued");
        unflushed.committed(2, ["ses_b"]);
        tokio::time::timeout(Duration::from_millis(50), unflushed.all_settled())
            .await
            .expect("everything is committed");
        assert!(
            unflushed.sessions.is_empty(),
            "committed entries are dropped"
        );
    }

    #[tokio::test]
    async fn a_newer_write_keeps_its_sessions_entry() {
        let unflushed = Unflushed::default();
        let first = unflushed.send(|| Ok::<(), ()>(())).unwrap();
        unflushed.behind(first, ["ses_a"]);
        let second = unflushed.send(|| Ok::<(), ()>(())).unwrap();
        unflushed.behind(second, ["ses_a"]);
        unflushed.committed(1, ["ses_a"]);
        let waiting = tokio::time::timeout(Duration::from_millis(20), unflushed.settled("ses_a"));
        assert!(waiting.await.is_err(), "job 2 of ses_a is still queued");
    }

    #[tokio::test]
    async fn a_failed_send_takes_no_number() {
        let unflushed = Unflushed::default();
        assert!(unflushed.send(|| Err::<(), _>("closed")).is_err());
        assert_eq!(unflushed.send(|| Ok::<(), ()>(())).unwrap(), 1);
    }
}
