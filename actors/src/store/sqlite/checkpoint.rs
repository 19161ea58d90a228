//! Checkpoints: the write-ahead log is folded back into the database file in the background,
//! so that no write pays for the fsync that takes.

use std::time::Duration;

use sqlx::{Connection, SqliteConnection};
use tokio::sync::mpsc;

use crate::store::write::Job;

use super::commit::SqliteWriter;

/// How often the write-ahead log is folded back into the database file.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Folds the write-ahead log into the database every second, off the write path, for as long
/// as the store is open. Passive checkpoints never block the writer or readers.
pub(super) async fn checkpoint(
    mut conn: SqliteConnection,
    store: mpsc::WeakUnboundedSender<Job<SqliteWriter>>,
) {
    let mut ticks = tokio::time::interval(CHECKPOINT_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if store.upgrade().is_none() {
            break;
        }
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut conn)
            .await
        {
            tracing::warn!("checkpoint failed: {e}");
        }
    }
    let _ = conn.close().await;
}
