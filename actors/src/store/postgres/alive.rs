//! Which runtimes sharing the database are alive: each holds a PostgreSQL advisory lock named
//! after its id, on a connection of its own, for as long as it runs. The server releases the
//! lock when that connection ends, however the process ended (a `kill -9` too), so another
//! runtime that can take the lock knows its holder is gone; it lets it go at once. A holder
//! whose connection broke (the server restarted, the network was cut) takes the lock again as
//! soon as the server answers, and says so.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::store::StoreError;

/// How often the holder checks that its connection (and so its lock) is still there.
const CHECK: Duration = Duration::from_secs(2);

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
    let mut conn = options.connect().await?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key(id))
        .execute(&mut conn)
        .await?;
    Ok(conn)
}

impl Alive {
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
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(CHECK) => {}
                }
                if conn.ping().await.is_ok() {
                    continue;
                }
                tracing::warn!(runtime = %id, "the connection holding this runtime's liveness lock broke; taking it again");
                loop {
                    match take(&options, &id).await {
                        Ok(again) => {
                            conn = again;
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
