//! The schema migrations in `actors/migrations`, embedded in the binary as text and applied by
//! sqlx's migrator (the same versions, descriptions and checksums `sqlx::migrate!` would give,
//! without compiling sqlx's macros).

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// Each migration: its version, its description and its SQL, from `<version>_<words>.sql`.
const FILES: &[(i64, &str, &str)] = &[
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
];

/// The embedded migrations as a source for sqlx's migrator.
#[derive(Debug)]
struct Embedded;

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async {
            Ok(FILES
                .iter()
                .map(|(version, description, sql)| {
                    Migration::new(
                        *version,
                        Cow::Borrowed(*description),
                        MigrationType::Simple,
                        Cow::Borrowed(*sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// The migrator of the store's schema.
pub(super) async fn migrator() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_migrations_folder_is_embedded_in_order() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        names.sort();
        let embedded: Vec<String> = FILES
            .iter()
            .map(|(v, d, _)| format!("{v:04}_{}.sql", d.replace(' ', "_")))
            .collect();
        assert_eq!(embedded, names, "add a new migration file to FILES");
        for (name, (_, _, sql)) in names.iter().zip(FILES) {
            assert_eq!(std::fs::read_to_string(folder.join(name)).unwrap(), *sql);
        }
    }
}
