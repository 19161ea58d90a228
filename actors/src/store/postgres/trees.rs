//! The per-tree count of created children, shared by every node on the database: one row per
//! root, moved by single statements so that nodes counting at once never pass the limit.

use sqlx::PgPool;
use taskforce_agents::id::SessionId;

use crate::store::rows::database;
use crate::store::{StoreError, TreeCount};

/// Counts one more child of `root`'s tree when fewer than `limit` were created; a tree with no
/// row starts at `seed` (or is reported unseeded without one).
pub(super) async fn count(
    pool: &PgPool,
    root: &SessionId,
    seed: Option<usize>,
    limit: usize,
) -> Result<TreeCount, StoreError> {
    let context = format!("counting a child of tree {root}");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let counted: Option<i64> = sqlx::query_scalar(
        "UPDATE tree_count SET created = created + 1 WHERE root = $1 AND created < $2 \
         RETURNING created",
    )
    .bind(root.as_str())
    .bind(limit)
    .fetch_optional(pool)
    .await
    .map_err(database(&context))?;
    if counted.is_some() {
        return Ok(TreeCount::Counted);
    }
    let known: Option<i64> = sqlx::query_scalar("SELECT created FROM tree_count WHERE root = $1")
        .bind(root.as_str())
        .fetch_optional(pool)
        .await
        .map_err(database(&context))?;
    // A row that appeared since the update (another node started the count) is counted on
    // below like any other; only a tree with no row at all needs its seed.
    let seed = match (known, seed) {
        (Some(_), _) => 0,
        (None, Some(seed)) => seed,
        (None, None) => return Ok(TreeCount::Unseeded),
    };
    // The first node to start the count sets it; one that comes at the same time counts on
    // top of it, under the same limit.
    let seed = i64::try_from(seed).unwrap_or(i64::MAX);
    let counted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO tree_count (root, created) VALUES ($1, $2 + 1) \
         ON CONFLICT (root) DO UPDATE SET created = tree_count.created + 1 \
         WHERE tree_count.created < $3 \
         RETURNING created",
    )
    .bind(root.as_str())
    .bind(seed)
    .bind(limit)
    .fetch_optional(pool)
    .await
    .map_err(database(&context))?;
    match counted {
        Some(created) if created <= limit => Ok(TreeCount::Counted),
        // Started above the limit by its stored descendants: take it back.
        Some(created) => {
            uncount(pool, root).await?;
            Ok(TreeCount::Full {
                created: usize::try_from(created - 1).unwrap_or(usize::MAX),
            })
        }
        None => Ok(TreeCount::Full {
            created: usize::try_from(limit).unwrap_or(usize::MAX),
        }),
    }
}

/// Takes back one child counted in `root`'s tree.
pub(super) async fn uncount(pool: &PgPool, root: &SessionId) -> Result<(), StoreError> {
    sqlx::query("UPDATE tree_count SET created = created - 1 WHERE root = $1 AND created > 0")
        .bind(root.as_str())
        .execute(pool)
        .await
        .map_err(database(&format!("taking back a child of tree {root}")))?;
    Ok(())
}
