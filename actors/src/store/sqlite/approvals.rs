//! Adding a project's "always" approvals (the `permission_approval` table, migration 0003),
//! one row at a time in one transaction.

use sqlx::{Connection, SqliteConnection};

use crate::store::rows::{database, to_sql};
use crate::store::{Approval, StoreError};

/// Inserts approvals of `project` in one transaction; existing ones are left as they are.
pub(super) async fn insert(
    conn: &mut SqliteConnection,
    project: String,
    approvals: Vec<Approval>,
    context: String,
) -> Result<(), StoreError> {
    let mut tx = conn.begin().await.map_err(database(&context))?;
    for approval in &approvals {
        sqlx::query(
            "INSERT INTO permission_approval (project_id, permission, pattern, time_created) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
        )
        .bind(&project)
        .bind(&approval.permission)
        .bind(&approval.pattern)
        .bind(to_sql(approval.created))
        .execute(&mut *tx)
        .await
        .map_err(database(&context))?;
    }
    tx.commit().await.map_err(database(&context))
}
