//! The read connections: a few read-only connections that in WAL mode never wait for the
//! writer, handed out in turn; the reads themselves are the shared ones of `store/queries.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::SqliteConnection;
use tokio::sync::{Mutex as AsyncMutex, MutexGuard as AsyncMutexGuard};

/// Read-only connections handed out round robin (cheaper than a pool's acquire and release).
#[derive(Debug)]
pub(super) struct Readers {
    conns: Vec<AsyncMutex<SqliteConnection>>,
    next: AtomicUsize,
}

impl Readers {
    /// Hands out `conns` (at least one).
    pub(super) fn new(conns: Vec<AsyncMutex<SqliteConnection>>) -> Readers {
        Readers {
            conns,
            next: AtomicUsize::new(0),
        }
    }

    /// A free connection, else the next one in turn once it is free.
    pub(super) async fn get(&self) -> AsyncMutexGuard<'_, SqliteConnection> {
        for conn in &self.conns {
            if let Ok(guard) = conn.try_lock() {
                return guard;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[i].lock().await
    }
}
