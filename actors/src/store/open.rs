//! Opening the store the configuration names (`[store] url`): SQLite in a directory (the data
//! directory by default) or a PostgreSQL database.

use std::path::Path;
use std::sync::Arc;

use taskforce_agents::config::{StoreBackend, StoreConfig};

use super::{PostgresStore, SqliteStore, Store, StoreError};

/// The backend `config` names, or why its url is refused.
fn backend(config: &StoreConfig) -> Result<StoreBackend, StoreError> {
    config
        .backend()
        .map_err(|message| StoreError::Address { message })
}

/// Opens the store `config` names, with SQLite's file in `data_dir` unless it names another
/// directory.
pub async fn open_store(
    config: &StoreConfig,
    data_dir: &Path,
) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match backend(config)? {
        StoreBackend::Sqlite(dir) => {
            Arc::new(SqliteStore::open(dir.as_deref().unwrap_or(data_dir)).await?)
        }
        StoreBackend::Postgres(url) => Arc::new(PostgresStore::open(&url).await?),
    })
}

/// Where the store `config` names keeps its data, as it may be shown: SQLite's file, or the
/// PostgreSQL server and database (without the password).
pub fn store_location(config: &StoreConfig, data_dir: &Path) -> Result<String, StoreError> {
    Ok(match backend(config)? {
        StoreBackend::Sqlite(dir) => dir
            .as_deref()
            .unwrap_or(data_dir)
            .join(SqliteStore::FILE_NAME)
            .display()
            .to_string(),
        StoreBackend::Postgres(url) => PostgresStore::address_of(&url)?,
    })
}
