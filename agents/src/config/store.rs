//! `[store]`: where sessions, messages and parts are kept. Left out, in SQLite in the data
//! directory; `url = "postgres://…"` puts them in a PostgreSQL database that several runtimes
//! may share.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::redact::{REDACTED, url_credentials, url_user_info};

/// `[store]`: the database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:password@host:5432/database` (or `postgresql://`): a PostgreSQL
    /// database; `sqlite:` optionally followed by a directory: the SQLite file `taskforce.db`
    /// there (the data directory when none is given). Left out: SQLite in the data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The database a [`StoreConfig`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    /// SQLite's `taskforce.db` in this directory, or in the data directory when `None`.
    Sqlite(Option<PathBuf>),
    /// PostgreSQL at this URL (with its password, if it has one: do not show it).
    Postgres(String),
}

impl StoreConfig {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == StoreConfig::default()
    }

    /// The database `url` names: `Err` says what is wrong with it (without its password).
    pub fn backend(&self) -> Result<StoreBackend, String> {
        let Some(url) = self.url.as_deref().map(str::trim) else {
            return Ok(StoreBackend::Sqlite(None));
        };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let dir = rest.strip_prefix("//").unwrap_or(rest);
            return Ok(StoreBackend::Sqlite(
                (!dir.is_empty()).then(|| PathBuf::from(dir)),
            ));
        }
        match url.split_once("://") {
            Some(("postgres" | "postgresql", rest)) if !rest.is_empty() => {
                Ok(StoreBackend::Postgres(url.to_string()))
            }
            _ => Err(format!(
                "\"{}\" is neither a PostgreSQL URL (postgres://user:password@host:5432/database) nor sqlite: (optionally followed by a directory)",
                redacted_url(url)
            )),
        }
    }

    /// Checks `url`: `(key, what is wrong)` for a problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        self.backend()
            .map(|_| ())
            .map_err(|message| ("store.url".to_string(), message))
    }

    /// The credentials in `url` (user and password, a `password=` parameter), for redaction.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let Some(url) = &self.url else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(info) = url_user_info(url) {
            out.push(info.to_string());
            if let Some((_, password)) = info.split_once(':') {
                out.push(password.to_string());
            }
        }
        out.extend(password_parameter(url).map(|(_, value)| value.to_string()));
        out
    }
}

/// A database URL as it may be shown: its user-info and any `password=` parameter replaced.
pub fn redacted_url(url: &str) -> String {
    let shown = url_credentials(url).into_owned();
    match password_parameter(&shown) {
        Some((start, value)) => {
            let end = start + value.len();
            format!("{}{REDACTED}{}", &shown[..start], &shown[end..])
        }
        None => shown,
    }
}

/// Where the value of a `password=` query parameter starts in `url`, and the value.
fn password_parameter(url: &str) -> Option<(usize, &str)> {
    let query_start = url.find('?')? + 1;
    let mut offset = query_start;
    for pair in url[query_start..].split('&') {
        if let Some(value) = pair.strip_prefix("password=") {
            return Some((offset + "password=".len(), value));
        }
        offset += pair.len() + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(url: &str) -> StoreConfig {
        StoreConfig {
            url: Some(url.into()),
        }
    }

    #[test]
    fn urls_name_their_backend() {
        assert_eq!(
            StoreConfig::default().backend(),
            Ok(StoreBackend::Sqlite(None))
        );
        assert_eq!(url("sqlite:").backend(), Ok(StoreBackend::Sqlite(None)));
        assert_eq!(
            url("sqlite:///srv/taskforce").backend(),
            Ok(StoreBackend::Sqlite(Some("/srv/taskforce".into())))
        );
        assert_eq!(
            url("sqlite:data").backend(),
            Ok(StoreBackend::Sqlite(Some("data".into())))
        );
        for pg in ["postgres://u:p@db/tf", "postgresql://db.example:5433/tf"] {
            assert_eq!(url(pg).backend(), Ok(StoreBackend::Postgres(pg.into())));
        }
        for bad in [
            "mysql://u:pw42@db/tf",
            "/srv/data",
            "postgres://",
            "postgres:db",
        ] {
            let err = url(bad).backend().unwrap_err();
            assert!(err.contains("neither a PostgreSQL URL"), "{err}");
            assert!(!err.contains("pw42"), "{err}");
        }
    }

    #[test]
    fn passwords_are_redacted_wherever_the_url_has_them() {
        assert_eq!(
            redacted_url("postgres://ann:s3cret@db/tf?sslmode=disable"),
            "postgres://[redacted]@db/tf?sslmode=disable"
        );
        assert_eq!(
            redacted_url("postgres://db/tf?user=ann&password=s3cret&sslmode=disable"),
            "postgres://db/tf?user=ann&password=[redacted]&sslmode=disable"
        );
        assert_eq!(redacted_url("postgres://db/tf"), "postgres://db/tf");
        let secrets = url("postgres://ann:s3cret@db/tf?password=other").secrets();
        assert!(secrets.contains(&"s3cret".to_string()), "{secrets:?}");
        assert!(secrets.contains(&"other".to_string()), "{secrets:?}");
    }
}
