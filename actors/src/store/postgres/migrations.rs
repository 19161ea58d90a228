//! The PostgreSQL schema's migrations, the files of `actors/migrations/postgres`: the same
//! versions and descriptions as SQLite's, each making the same change (or none, where the step
//! only concerned SQLite).

use sqlx::migrate::Migrator;

use crate::store::migrations::File;

/// Each migration: its version, its description and its SQL, from `<version>_<words>.sql`.
const FILES: &[File] = &[
    (
        1,
        "init",
        include_str!("../../../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "write batch",
        include_str!("../../../migrations/postgres/0002_write_batch.sql"),
    ),
    (
        3,
        "permission approval",
        include_str!("../../../migrations/postgres/0003_permission_approval.sql"),
    ),
    (
        4,
        "background task",
        include_str!("../../../migrations/postgres/0004_background_task.sql"),
    ),
    (
        5,
        "drop write batch",
        include_str!("../../../migrations/postgres/0005_drop_write_batch.sql"),
    ),
    (
        6,
        "unfinished answers",
        include_str!("../../../migrations/postgres/0006_unfinished_answers.sql"),
    ),
    (
        7,
        "session order",
        include_str!("../../../migrations/postgres/0007_session_order.sql"),
    ),
    (
        8,
        "tree count",
        include_str!("../../../migrations/postgres/0008_tree_count.sql"),
    ),
    (
        9,
        "part session index",
        include_str!("../../../migrations/postgres/0009_part_session_index.sql"),
    ),
];

/// The migrator of the store's schema.
pub(super) async fn migrator() -> Result<Migrator, sqlx::migrate::MigrateError> {
    crate::store::migrations::migrator(FILES).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_file_of_the_migrations_folder_is_embedded_in_order() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
        crate::store::migrations::assert_embedded(&folder, super::FILES);
    }

    #[test]
    fn both_backends_have_the_same_versions_and_descriptions() {
        use crate::store::migrations::sql_files;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        assert_eq!(sql_files(&root), sql_files(&root.join("postgres")));
    }
}
