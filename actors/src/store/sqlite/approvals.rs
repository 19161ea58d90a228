//! The `permission_approval` table: a project's "always" approvals (migration 0003).

use sqlx::{Connection, SqliteConnection};

use crate::store::rows::{database, decode_approval, to_sql};
use crate::store::{Approval, StoreError};

/// Every approval of `project`, oldest first.
pub(super) async fn read(
    conn: &mut SqliteConnection,
    project: &str,
) -> Result<Vec<Approval>, StoreError> {
    let rows = sqlx::query(
        "SELECT permission, pattern, time_created FROM permission_approval \
         WHERE project_id = ?1 ORDER BY time_created, permission, pattern",
    )
    .bind(project)
    .fetch_all(conn)
    .await
    .map_err(database(format_args!(
        "cannot read the approvals of project {project}"
    )))?;
    rows.iter()
        .map(|row| decode_approval(row, project))
        .collect()
}

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
