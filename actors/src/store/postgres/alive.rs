//! Which runtimes sharing the database are alive: each holds a PostgreSQL advisory lock named
//! after its id, on a connection of its own, for as long as it runs. The server releases the
//! lock when that connection ends, however the process ended (a `kill -9` too), so another
//! runtime that can take the lock knows its holder is gone; it lets it go at once. A holder
//! whose connection broke (the server restarted, the network was cut) takes the lock again as
//! soon as the server answers, and says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::store::StoreError;

/// How often the holder checks that its connection (and so its lock) is still there.
const CHECK: Duration = Duration::from_secs(2);
/// How long a check or a new connection may take before the server counts as unreachable.
const REACH: Duration = Duration::from_secs(5);

/// The advisory lock key of runtime `id`: 64 bits of a stable hash (FNV-1a) of its id.
fn key(id: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in "taskforce runtime ".bytes().chain(id.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// The lock of this process's runtime, once held; dropping the store stops holding it.
#[derive(Debug, Default)]
pub(super) struct Alive {
    held: Mutex<Option<CancellationToken>>,
    link: Arc<Link>,
}

/// What the holder has seen of its connection to the server.
#[derive(Debug, Default)]
struct Link {
    /// The connection broke and is not back yet.
    lost: AtomicBool,
    /// How many times it broke.
    losses: AtomicU64,
    /// When it last broke and when it was last back (epoch ms; 0: never).
    lost_at: AtomicU64,
    back_at: AtomicU64,
}

impl Link {
    fn broke(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            self.losses.fetch_add(1, Ordering::SeqCst);
            self.lost_at
                .store(taskforce_agents::id::now_ms(), Ordering::SeqCst);
        }
    }

    fn back(&self) {
        self.back_at
            .store(taskforce_agents::id::now_ms(), Ordering::SeqCst);
        self.lost.store(false, Ordering::SeqCst);
    }

    /// The link in a few words: `connected`, with how often it was lost, or since when not.
    fn describe(&self) -> String {
        let losses = self.losses.load(Ordering::SeqCst);
        if self.lost.load(Ordering::SeqCst) {
            let since = self.lost_at.load(Ordering::SeqCst);
            return format!(
                "disconnected since {since} (epoch ms), reconnecting; lost {losses} time(s)"
            );
        }
        match losses {
            0 => "connected".into(),
            n => format!(
                "connected; lost {n} time(s), back since {} (epoch ms)",
                self.back_at.load(Ordering::SeqCst)
            ),
        }
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        if let Some(stop) = self.held.get_mut().take() {
            stop.cancel();
        }
    }
}

/// Connects and takes runtime `id`'s lock on the new connection.
async fn take(options: &PgConnectOptions, id: &str) -> Result<PgConnection, sqlx::Error> {
    let taking = async {
        let mut conn = options.connect().await?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key(id))
            .execute(&mut conn)
            .await?;
        Ok(conn)
    };
    tokio::time::timeout(REACH, taking)
        .await
        .unwrap_or(Err(sqlx::Error::PoolTimedOut))
}

impl Alive {
    /// How the connection holding the lock is, in a few words (`None` before it is held).
    pub(super) fn describe(&self) -> Option<String> {
        let held = self.held.try_lock().map(|h| h.is_some()).unwrap_or(true);
        held.then(|| self.link.describe())
    }

    /// Holds runtime `id`'s lock from now on (once per store), on a connection of its own
    /// that a task keeps open and takes again when it breaks.
    pub(super) async fn hold(&self, options: PgConnectOptions, id: &str) -> Result<(), StoreError> {
        let mut held = self.held.lock().await;
        if held.is_some() {
            return Ok(());
        }
        let mut conn = take(&options, id).await.map_err(|e| {
            StoreError::Database(format!(
                "cannot take the lock that tells this runtime is alive: {e}"
            ))
        })?;
        let stop = CancellationToken::new();
        *held = Some(stop.clone());
        let id = id.to_string();
        let link = self.link.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(CHECK) => {}
                }
                if matches!(tokio::time::timeout(REACH, conn.ping()).await, Ok(Ok(()))) {
                    continue;
                }
                link.broke();
                tracing::warn!(runtime = %id, "the connection holding this runtime's liveness lock broke; taking it again");
                loop {
                    match take(&options, &id).await {
                        Ok(again) => {
                            conn = again;
                            link.back();
                            tracing::info!(runtime = %id, "this runtime's liveness lock is held again");
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(runtime = %id, "cannot take this runtime's liveness lock again yet: {e}")
                        }
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(CHECK) => {}
                    }
                }
            }
            let _ = conn.close().await;
        });
        Ok(())
    }
}

/// Whether runtime `id` holds its lock (is alive); `None` when the database cannot tell now.
pub(super) async fn is_alive(pool: &PgPool, id: &str) -> Option<bool> {
    let mut conn = pool.acquire().await.ok()?;
    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(key(id))
        .fetch_one(&mut *conn)
        .await
        .ok()?;
    if taken {
        // Nobody held it: its runtime is gone. Let it go again at once.
        let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(key(id))
            .execute(&mut *conn)
            .await;
    }
    Some(!taken)
}

/// The connect options the store's pool uses.
pub(super) fn options_of(pool: &PgPool) -> PgConnectOptions {
    (*pool.connect_options()).clone()
}

/// Shared between the store's clones.
pub(super) type SharedAlive = Arc<Alive>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_differ_between_runtimes() {
        assert_eq!(key("rt_01"), key("rt_01"));
        assert_ne!(key("rt_01"), key("rt_02"));
    }
}
