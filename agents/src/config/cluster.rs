//! `[cluster]`: joining a taskforce cluster over NATS JetStream. A node joins when it is served
//! with `taskforce serve --cluster`, or when `enabled = true`; either way `nats` must name the
//! server.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The prefix used when `[cluster] prefix` is left out.
pub const DEFAULT_CLUSTER_PREFIX: &str = "taskforce";

/// `[cluster]`: how this node joins a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Join the cluster whenever the runtime is served (as `taskforce serve --cluster` does).
    pub enabled: bool,
    /// The NATS server, `nats://host:4222` (user and password may be in the URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats: Option<String>,
    /// Names this cluster's subjects, streams and buckets, so that clusters can share a NATS
    /// (letters, digits, `_` and `-` only).
    pub prefix: String,
    /// This node's name (letters, digits, `_` and `-`); none: the host name and a fresh id,
    /// new at each start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How often this node renews its lease.
    #[serde(with = "super::serde_duration")]
    pub heartbeat: Duration,
    /// How long a lease lasts without renewal; a node silent longer counts as dead.
    #[serde(with = "super::serde_duration")]
    pub lease: Duration,
    /// How long the events stream keeps events (reconnecting clients resume within this).
    #[serde(with = "super::serde_duration")]
    pub max_age: Duration,
    /// The most bytes the events stream keeps; the oldest events go first.
    pub max_bytes: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            enabled: false,
            nats: None,
            prefix: DEFAULT_CLUSTER_PREFIX.into(),
            node: None,
            heartbeat: Duration::from_secs(2),
            lease: Duration::from_secs(10),
            max_age: Duration::from_secs(24 * 60 * 60),
            max_bytes: 1024 * 1024 * 1024,
        }
    }
}

impl ClusterConfig {
    /// Whether nothing is set.
    pub fn is_default(&self) -> bool {
        *self == ClusterConfig::default()
    }

    /// The NATS URL, or an error naming `[cluster] nats` when it is missing.
    pub fn nats_url(&self) -> Result<&str, String> {
        self.nats.as_deref().ok_or_else(|| {
            "[cluster] nats is not set; a cluster node needs the NATS server, e.g. \
             nats = \"nats://127.0.0.1:4222\" (or TASKFORCE_CLUSTER__NATS)"
                .to_string()
        })
    }

    /// Checks the keys: `(key, what is wrong)` for the first problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, message: String| Err((format!("cluster.{key}"), message));
        if let Err(message) = check_name(&self.prefix) {
            return bad("prefix", message);
        }
        if let Some(node) = &self.node
            && let Err(message) = check_name(node)
        {
            return bad("node", message);
        }
        match &self.nats {
            Some(url) => {
                if let Err(message) = check_nats_url(url) {
                    return bad("nats", message);
                }
            }
            None if self.enabled => {
                return bad(
                    "nats",
                    "missing; `enabled = true` needs the NATS server, e.g. \"nats://127.0.0.1:4222\""
                        .into(),
                );
            }
            None => {}
        }
        for (key, d) in [
            ("heartbeat", self.heartbeat),
            ("lease", self.lease),
            ("max_age", self.max_age),
        ] {
            if d.is_zero() {
                return bad(key, "must be longer than zero".into());
            }
        }
        if self.lease <= self.heartbeat {
            return bad(
                "lease",
                format!(
                    "must be longer than `heartbeat` ({}), or every lease lapses before it is renewed",
                    humantime::format_duration(self.heartbeat)
                ),
            );
        }
        if self.max_bytes < 1024 * 1024 {
            return bad("max_bytes", "must be at least 1048576 (1 MiB)".into());
        }
        Ok(())
    }
}

/// Whether `name` may name NATS subjects, streams, buckets and keys: 1 to 64 characters from
/// `A-Z a-z 0-9 _ -`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > 64 {
        return Err(format!("\"{name}\" is longer than 64 characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "\"{name}\" has {c:?}; it names NATS subjects, streams and buckets, so only letters, digits, `_` and `-` are allowed"
        ));
    }
    Ok(())
}

/// Whether `url` is a NATS server address (`nats://`, `tls://`, `ws://`, `wss://` with a
/// host, or a bare `host:port`).
fn check_nats_url(url: &str) -> Result<(), String> {
    let with_scheme = if url.contains("://") {
        url.to_string()
    } else {
        format!("nats://{url}")
    };
    match url::Url::parse(&with_scheme) {
        Ok(parsed)
            if matches!(parsed.scheme(), "nats" | "tls" | "ws" | "wss")
                && parsed.host_str().is_some_and(|h| !h.is_empty()) =>
        {
            Ok(())
        }
        Ok(parsed) if !matches!(parsed.scheme(), "nats" | "tls" | "ws" | "wss") => Err(format!(
            "\"{url}\" has scheme `{}`; expected nats://, tls://, ws:// or wss://",
            parsed.scheme()
        )),
        Ok(_) => Err(format!("\"{url}\" names no host")),
        Err(e) => Err(format!(
            "\"{url}\" is not a URL ({e}); expected e.g. \"nats://127.0.0.1:4222\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_node_names_allow_only_letters_digits_underscore_and_dash() {
        assert!(check_name("taskforce").is_ok());
        assert!(check_name("tf_test-01").is_ok());
        for bad in ["", "a.b", "a b", "a*", "a>", "ü", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_key_is_named_in_the_error() {
        let config = ClusterConfig {
            prefix: "my.cluster".into(),
            ..Default::default()
        };
        let (key, message) = config.validate().unwrap_err();
        assert_eq!(key, "cluster.prefix");
        assert!(message.contains("only letters"), "{message}");
        let config = ClusterConfig {
            enabled: true,
            ..Default::default()
        };
        assert_eq!(config.validate().unwrap_err().0, "cluster.nats");
        let config = ClusterConfig {
            nats: Some("http://x:4222".into()),
            ..Default::default()
        };
        assert_eq!(config.validate().unwrap_err().0, "cluster.nats");
        let config = ClusterConfig {
            lease: Duration::from_secs(1),
            ..Default::default()
        };
        assert_eq!(config.validate().unwrap_err().0, "cluster.lease");
        let config = ClusterConfig {
            nats: Some("127.0.0.1:4222".into()),
            node: Some("node-a".into()),
            ..Default::default()
        };
        assert!(config.validate().is_ok());
        assert!(
            ClusterConfig::default()
                .nats_url()
                .unwrap_err()
                .contains("[cluster] nats")
        );
    }
}
