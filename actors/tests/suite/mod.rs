mod anthropic;
mod background;
mod background_limits;
mod bus;
mod cluster;
mod cluster_asks;
mod cluster_work;
mod commands;
mod compaction;
mod crash;
mod delegated_permissions;
mod generate;
mod layers;
mod mcp;
mod mcp_local;
#[cfg(feature = "openapi")]
mod openapi;
mod permissions;
mod questions;
mod retries;
mod runtime;
mod skills;
mod store;
mod streaming;
mod subagent_limits;
mod subagent_parallel;
mod subagent_timeouts;
mod subagents;
mod titles;
mod undo;
mod web_tools;

/// The next event of `sub`; panics when none comes within the test kit's patience, the stream
/// ends or the subscriber lagged.
async fn next_event(sub: &mut taskforce_actors::bus::Subscription) -> taskforce_actors::bus::Event {
    use futures::StreamExt;
    match tokio::time::timeout(taskforce_testkit::wait::PATIENCE, sub.next()).await {
        Ok(Some(taskforce_actors::bus::BusItem::Event(e))) => e.event.clone(),
        other => panic!("expected an event, got {other:?}"),
    }
}
