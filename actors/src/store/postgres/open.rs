//! Opening the store: the address, the migrations (one connection, under sqlx's advisory lock,
//! so that nodes starting at once on a new database apply them once), the pool and the writer.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use taskforce_agents::config::redact::url_credentials;

use crate::store::StoreError;
use crate::store::write::WriteQueue;

use super::{PostgresStore, Writer};

/// How many connections a store keeps open at most (reads take any, the writer one).
const POOL_SIZE: u32 = 8;

/// How long a statement waits for a free connection before failing.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

impl PostgresStore {
    /// Opens the database at `url` (`postgres://user:password@host:port/database?…`, or
    /// `postgresql://`) and brings its schema up to date.
    pub async fn open(url: &str) -> Result<PostgresStore, StoreError> {
        Self::open_with(parse(url)?).await
    }

    /// The server and database `url` names, without the password
    /// (`postgres://user@host:5432/database`).
    pub fn address_of(url: &str) -> Result<String, StoreError> {
        Ok(address(&parse(url)?))
    }

    /// Opens the database `options` connect to and brings its schema up to date.
    pub async fn open_with(options: PgConnectOptions) -> Result<PostgresStore, StoreError> {
        let address = address(&options);
        let open_error = |message: String| StoreError::Open {
            path: address.clone(),
            message: url_credentials(&message).into_owned(),
        };
        let mut conn = options
            .connect()
            .await
            .map_err(|e| open_error(format!("cannot connect: {e}")))?;
        super::migrations::migrator()
            .await
            .map_err(|e| open_error(format!("cannot read the migrations: {e}")))?
            .run(&mut conn)
            .await
            .map_err(|e| open_error(format!("cannot apply the migrations: {e}")))?;
        let _ = conn.close().await;

        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(options);
        tracing::debug!(%address, "opened the store");
        Ok(PostgresStore {
            address,
            writes: WriteQueue::start(Writer(pool.clone())),
            pool,
            alive: Default::default(),
        })
    }
}

/// The connect options of a `postgres://` or `postgresql://` URL.
pub(super) fn parse(url: &str) -> Result<PgConnectOptions, StoreError> {
    let shown = url_credentials(url);
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    if !matches!(scheme, Some("postgres" | "postgresql")) {
        return Err(StoreError::Address {
            message: format!("{shown} is not a postgres:// or postgresql:// URL"),
        });
    }
    PgConnectOptions::from_str(url).map_err(|e| StoreError::Address {
        message: format!(
            "{shown} is not a usable PostgreSQL URL: {}",
            url_credentials(&e.to_string())
        ),
    })
}

/// The server and database of `options`, without the password.
fn address(options: &PgConnectOptions) -> String {
    let user = options.get_username();
    let database = options.get_database().unwrap_or(user);
    match options.get_socket() {
        Some(socket) => format!("postgres://{user}@{}/{database}", socket.display()),
        None => format!(
            "postgres://{user}@{}:{}/{database}",
            options.get_host(),
            options.get_port()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_leaves_the_password_out() {
        let options = parse("postgres://ann:s3cret@db.example:6543/tf?sslmode=disable").unwrap();
        assert_eq!(address(&options), "postgres://ann@db.example:6543/tf");
        let options = parse("postgresql://ann:s3cret@db.example/tf").unwrap();
        assert_eq!(address(&options), "postgres://ann@db.example:5432/tf");
    }

    #[test]
    fn a_url_of_another_kind_is_refused_naming_the_key_and_not_the_password() {
        for url in [
            "mysql://ann:s3cret@db.example/tf",
            "db.example:5432",
            "postgres://ann:s3cret@db.example/tf?sslmode=sometimes",
        ] {
            let err = parse(url).unwrap_err().to_string();
            assert!(err.contains("[store] url"), "{err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
}
