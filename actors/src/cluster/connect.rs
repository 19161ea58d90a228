//! The NATS connection (it reconnects on its own; its state is tracked in [`Counters`]), and
//! the events stream and the nodes bucket, created when missing and reused when present.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use async_nats::{Client, ConnectOptions};
use taskforce_agents::config::ClusterConfig;
use taskforce_agents::config::redact::url_credentials;

use super::ClusterError;
use super::names::Names;
use super::status::Counters;

/// How long JetStream calls and publish acknowledgements may take before they count as failed.
const JETSTREAM_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a node lease stays in the bucket without renewal before NATS removes it (long
/// after it counts as expired, so that status shows dead nodes for a while).
const LEASE_RETENTION: Duration = Duration::from_secs(60 * 60);

/// The window in which the stream drops a republished event it already holds.
pub(crate) const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// Connects to `url` as `name`; the connection reconnects on its own for as long as it lives,
/// and `counters` follow its state.
pub(crate) async fn connect(
    url: &str,
    name: &str,
    counters: Option<Arc<Counters>>,
) -> Result<Client, ClusterError> {
    let mut options = ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .max_reconnects(None);
    if let Some(counters) = counters {
        options = options.event_callback(move |event| {
            let counters = counters.clone();
            async move {
                match event {
                    async_nats::Event::Disconnected => {
                        tracing::warn!("lost the connection to NATS; reconnecting");
                        counters.disconnected();
                    }
                    async_nats::Event::Connected => {
                        tracing::info!("connected to NATS");
                        counters.connected();
                    }
                    other => tracing::debug!("NATS: {other}"),
                }
            }
        });
    }
    options
        .connect(url)
        .await
        .map_err(|e| ClusterError::Connect {
            url: url_credentials(url).into_owned(),
            message: e.to_string(),
        })
}

/// A JetStream context on `client` with the cluster's timeouts.
pub(crate) fn context(client: Client) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(JETSTREAM_TIMEOUT)
        .ack_timeout(JETSTREAM_TIMEOUT)
        .build(client)
}

/// The events stream of `names`, created when missing; an existing one is reused when it
/// holds the cluster's subjects, and its retention is brought to `config`'s.
pub(crate) async fn events_stream(
    js: &jetstream::Context,
    names: &Names,
    config: &ClusterConfig,
) -> Result<stream::Stream, ClusterError> {
    let name = names.events_stream();
    let subjects = names.events_subjects();
    let max_bytes = i64::try_from(config.max_bytes).unwrap_or(i64::MAX);
    let wanted = stream::Config {
        name: name.clone(),
        description: Some("taskforce cluster events".into()),
        subjects: vec![subjects.clone()],
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        storage: stream::StorageType::File,
        max_age: config.max_age,
        max_bytes,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    };
    let mut stream = js
        .get_or_create_stream(wanted)
        .await
        .map_err(|e| ClusterError::jetstream(format!("opening stream {name}"), e))?;
    let info = stream
        .info()
        .await
        .map_err(|e| ClusterError::jetstream(format!("reading stream {name}"), e))?
        .clone();
    if !info.config.subjects.iter().any(|s| s == &subjects) {
        return Err(ClusterError::jetstream(
            format!("stream {name}"),
            format!(
                "it exists with subjects {:?}, not {subjects}; another program uses this name: choose another [cluster] prefix",
                info.config.subjects
            ),
        ));
    }
    if info.config.max_age != config.max_age || info.config.max_bytes != max_bytes {
        let updated = stream::Config {
            max_age: config.max_age,
            max_bytes,
            ..info.config.clone()
        };
        js.update_stream(updated)
            .await
            .map_err(|e| ClusterError::jetstream(format!("updating stream {name}"), e))?;
        tracing::info!("stream {name}: retention set to [cluster] max_age and max_bytes");
    }
    Ok(stream)
}

/// The node leases bucket of `names`, created when missing.
pub(crate) async fn nodes_bucket(
    js: &jetstream::Context,
    names: &Names,
    create: bool,
) -> Result<kv::Store, ClusterError> {
    let bucket = names.nodes_bucket();
    match js.get_key_value(&bucket).await {
        Ok(store) => return Ok(store),
        Err(e) if !create => {
            return Err(ClusterError::jetstream(
                format!("opening bucket {bucket}"),
                e,
            ));
        }
        Err(_) => {}
    }
    // The bucket's stream is made as the client library would make it; its own call first
    // reads the account's limits in a shape servers before 2.10 do not answer with.
    let created = js
        .create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            description: Some("taskforce cluster node leases".into()),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age: LEASE_RETENTION,
            storage: stream::StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            num_replicas: 1,
            ..Default::default()
        })
        .await;
    let created = match created {
        Ok(_) => js.get_key_value(&bucket).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match created {
        Ok(store) => Ok(store),
        // Another node created it meanwhile.
        Err(e) => js
            .get_key_value(&bucket)
            .await
            .map_err(|_| ClusterError::jetstream(format!("creating bucket {bucket}"), e)),
    }
}
