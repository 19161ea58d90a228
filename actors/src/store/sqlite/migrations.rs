//! The SQLite schema's migrations, the files of `actors/migrations`.

use sqlx::migrate::Migrator;

use crate::store::migrations::File;

/// Each migration: its version, its description and its SQL, from `<version>_<words>.sql`.
const FILES: &[File] = &[
    (1, "init", include_str!("../../../migrations/0001_init.sql")),
    (
        2,
        "write batch",
        include_str!("../../../migrations/0002_write_batch.sql"),
    ),
    (
        3,
        "permission approval",
        include_str!("../../../migrations/0003_permission_approval.sql"),
    ),
    (
        4,
        "background task",
        include_str!("../../../migrations/0004_background_task.sql"),
    ),
    (
        5,
        "drop write batch",
        include_str!("../../../migrations/0005_drop_write_batch.sql"),
    ),
    (
        6,
        "unfinished answers",
        include_str!("../../../migrations/0006_unfinished_answers.sql"),
    ),
    (
        7,
        "session order",
        include_str!("../../../migrations/0007_session_order.sql"),
    ),
    (
        8,
        "tree count",
        include_str!("../../../migrations/0008_tree_count.sql"),
    ),
    (
        9,
        "part session index",
        include_str!("../../../migrations/0009_part_session_index.sql"),
    ),
];

/// The migrator of the store's schema.
pub(super) async fn migrator() -> Result<Migrator, sqlx::migrate::MigrateError> {
    crate::store::migrations::migrator(FILES).await
}

/// A database file `test.db` in `dir` with the store's schema (write-ahead log, foreign keys
/// on), and a connection to it.
#[cfg(test)]
pub(super) async fn test_database(
    dir: &std::path::Path,
) -> (std::path::PathBuf, sqlx::SqliteConnection) {
    use sqlx::ConnectOptions;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    let path = dir.join("test.db");
    let mut conn = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true)
        .connect()
        .await
        .expect("a database file in a new directory opens");
    migrator()
        .await
        .expect("the migrations read")
        .run(&mut conn)
        .await
        .expect("the migrations apply");
    (path, conn)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_file_of_the_migrations_folder_is_embedded_in_order() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        crate::store::migrations::assert_embedded(&folder, super::FILES);
    }
}
