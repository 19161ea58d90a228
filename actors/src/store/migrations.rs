//! Schema migrations embedded in the binary as text and applied by sqlx's migrator (the same
//! versions, descriptions and checksums `sqlx::migrate!` would give, without compiling sqlx's
//! macros). Each backend has its own folder of files, with the same versions and descriptions.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// One migration: its version, its description and its SQL, from `<version>_<words>.sql`.
pub(crate) type File = (i64, &'static str, &'static str);

/// Embedded migrations as a source for sqlx's migrator.
#[derive(Debug)]
struct Embedded(&'static [File]);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move {
            Ok(self
                .0
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

/// The migrator of `files`.
pub(crate) async fn migrator(
    files: &'static [File],
) -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(files)).await
}

/// Checks that `files` are the `.sql` files of `folder`, in order and with the same text (for
/// the backends' tests).
#[cfg(test)]
pub(crate) fn assert_embedded(folder: &std::path::Path, files: &[File]) {
    let names = sql_files(folder);
    let embedded: Vec<String> = files
        .iter()
        .map(|(v, d, _)| format!("{v:04}_{}.sql", d.replace(' ', "_")))
        .collect();
    assert_eq!(embedded, names, "add a new migration file to FILES");
    for (name, (_, _, sql)) in names.iter().zip(files) {
        assert_eq!(std::fs::read_to_string(folder.join(name)).unwrap(), *sql);
    }
}

/// The names of the `.sql` files in `folder`, sorted.
#[cfg(test)]
pub(crate) fn sql_files(folder: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    names.sort();
    names
}
