//! A NATS for cluster tests: the server named by `TASKFORCE_TEST_NATS_URL`, with a prefix of
//! the test's own, so that tests and runs sharing the server never see each other; the
//! prefix's stream and bucket are deleted when the fixture is dropped.

use std::time::Duration;

/// The variable naming the NATS server of cluster tests.
pub const NATS_URL_VAR: &str = "TASKFORCE_TEST_NATS_URL";

/// A fresh cluster prefix on the test NATS server.
#[derive(Debug)]
pub struct TestNats {
    /// The server's URL.
    pub url: String,
    /// The prefix no other test or run uses.
    pub prefix: String,
}

impl TestNats {
    /// A fresh prefix for the test `test` on the server of `TASKFORCE_TEST_NATS_URL`; `None`
    /// (having printed why) when the variable is not set, so that the test skips.
    pub fn fresh(test: &str) -> Option<TestNats> {
        let Some(url) = std::env::var(NATS_URL_VAR).ok().filter(|u| !u.is_empty()) else {
            eprintln!(
                "skipping {test}: {NATS_URL_VAR} is not set (no NATS server to test against)"
            );
            return None;
        };
        let short: String = test
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(16)
            .collect();
        let unique = ulid_like();
        Some(TestNats {
            url,
            prefix: format!("tft_{short}_{unique}"),
        })
    }

    /// A `[cluster]` section joining this prefix as node `node`, with a short heartbeat and
    /// `lease`.
    pub fn cluster_toml(&self, node: &str, lease: &str) -> String {
        self.cluster_toml_via(&self.url, node, lease)
    }

    /// [`Self::cluster_toml`] reaching the server at `url` (a
    /// [`CutProxy`](crate::proxy::CutProxy) in front of it).
    pub fn cluster_toml_via(&self, url: &str, node: &str, lease: &str) -> String {
        format!(
            "\n[cluster]\nnats = \"{url}\"\nprefix = \"{}\"\nnode = \"{node}\"\nheartbeat = \"100ms\"\nlease = \"{lease}\"\nmax_age = \"10m\"\nmax_bytes = 67108864\n",
            self.prefix
        )
    }

    /// A client of the server.
    pub async fn client(&self) -> async_nats::Client {
        async_nats::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connecting to NATS at {}: {e}", self.url))
    }

    /// Deletes the prefix's streams and nodes bucket (missing ones are fine).
    pub async fn clean(&self) {
        clean(&self.url, &self.prefix).await;
    }
}

/// Deletes `prefix`'s streams and nodes bucket on the server at `url`.
async fn clean(url: &str, prefix: &str) {
    let Ok(client) = async_nats::connect(url).await else {
        return;
    };
    let js = async_nats::jetstream::new(client.clone());
    for stream in ["EVENTS", "WORK", "PLACED"] {
        let _ = js.delete_stream(format!("{prefix}_{stream}")).await;
    }
    let _ = js.delete_key_value(format!("{prefix}_NODES")).await;
    let _ = client.flush().await;
}

impl Drop for TestNats {
    /// Cleans up on a thread of its own (a drop cannot await), also when the test failed.
    fn drop(&mut self) {
        let (url, prefix) = (self.url.clone(), self.prefix.clone());
        let cleaning = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let _ = tokio::time::timeout(Duration::from_secs(10), clean(&url, &prefix)).await;
            });
        });
        let _ = cleaning.join();
    }
}

/// A short string unique to this call: the time in microseconds and a counter.
fn ulid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!(
        "{micros:x}{:x}{:x}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}
