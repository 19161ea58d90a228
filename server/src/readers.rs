//! How far each open SSE stream has handed the events to its connection, so that an answer can
//! wait until its turn's events are on their way to every client.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

/// The open streams' positions.
#[derive(Debug, Default)]
pub(crate) struct Readers {
    all: Mutex<ReaderList>,
    /// Woken whenever a stream moves on or leaves.
    progress: Notify,
}

#[derive(Debug, Default)]
struct ReaderList {
    next: u64,
    positions: Vec<(u64, Arc<AtomicU64>)>,
}

impl Readers {
    /// Adds a stream whose progress `sent` holds.
    pub(crate) fn join(readers: &Arc<Readers>, sent: Arc<AtomicU64>) -> ReaderPosition {
        let id = {
            let mut all = readers.lock();
            all.next += 1;
            let id = all.next;
            all.positions.push((id, Arc::clone(&sent)));
            id
        };
        ReaderPosition {
            id,
            sent,
            readers: Arc::clone(readers),
        }
    }

    /// Resolves at the next progress of any stream (or a stream leaving).
    pub(crate) fn progressed(&self) -> Notified<'_> {
        self.progress.notified()
    }

    fn lock(&self) -> MutexGuard<'_, ReaderList> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no stream is open.
    pub(crate) fn none_open(&self) -> bool {
        self.lock().positions.is_empty()
    }

    /// Whether every open stream has handed out everything up to `seq`.
    pub(crate) fn all_past(&self, seq: u64) -> bool {
        self.lock()
            .positions
            .iter()
            .all(|(_, sent)| sent.load(Ordering::Acquire) >= seq)
    }
}

/// Where one stream is: every event up to this number has been handed to its connection.
#[derive(Debug)]
pub(crate) struct ReaderPosition {
    id: u64,
    sent: Arc<AtomicU64>,
    readers: Arc<Readers>,
}

impl ReaderPosition {
    /// Everything up to `seq` has been handed out.
    pub(crate) fn reached(&self, seq: u64) {
        if self.sent.swap(seq, Ordering::AcqRel) != seq {
            self.readers.progress.notify_waiters();
        }
    }
}

impl Drop for ReaderPosition {
    fn drop(&mut self) {
        self.readers
            .lock()
            .positions
            .retain(|(id, _)| *id != self.id);
        self.readers.progress.notify_waiters();
    }
}
