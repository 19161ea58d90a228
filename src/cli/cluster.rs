//! `taskforce cluster status`: the nodes of the cluster named by the config's `[cluster]`,
//! read from its nodes bucket directly (no local node needs to run): their load, their NATS
//! connection and the age of their lease, expired leases marked.

use clap::Subcommand;
use taskforce_actors::cluster::{ClusterStatus, NodeStatus, read_status};

use super::UsageError;
use super::context::Context;
use super::output::outln;

/// `taskforce cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// List the nodes with a lease: load, connection, lease age (expired ones marked).
    Status {
        /// Print the status as JSON (the shape of `GET /cluster/status`).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `cluster` subcommand.
pub fn run(context: &Context, command: ClusterCommand) -> anyhow::Result<()> {
    let ClusterCommand::Status { json } = command;
    let config = context.loaded.config.cluster.clone();
    config
        .nats_url()
        .map_err(|e| UsageError::new(anyhow::anyhow!("{e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let status = runtime.block_on(read_status(&config))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&status)?)?;
        return Ok(());
    }
    for line in table(&status) {
        outln!("{}", line.trim_end())?;
    }
    Ok(())
}

/// The status as aligned lines: a header, then one line per node.
fn table(status: &ClusterStatus) -> Vec<String> {
    if status.nodes.is_empty() {
        return vec![format!("cluster {}: no nodes", status.prefix)];
    }
    let mut rows = vec![[
        "NODE".to_string(),
        "STATE".into(),
        "LEASE AGE".into(),
        "SESSIONS".into(),
        "SLOTS USED".into(),
        "NATS".into(),
        "ADDRESS".into(),
    ]];
    rows.extend(status.nodes.iter().map(row));
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut lines = vec![format!(
        "cluster {}: {} node(s)",
        status.prefix,
        status.nodes.len()
    )];
    lines.extend(rows.iter().map(|r| {
        r.iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    }));
    lines
}

fn row(node: &NodeStatus) -> [String; 7] {
    let info = &node.info;
    let nats = if info.nats.connected {
        match info.nats.disconnects {
            0 => "connected".to_string(),
            n => format!("connected ({n} drop(s))"),
        }
    } else {
        "disconnected".to_string()
    };
    [
        info.node.clone(),
        if node.expired { "EXPIRED" } else { "live" }.to_string(),
        format!("{:.1}s", node.lease_age_ms as f64 / 1000.0),
        info.load.running_sessions.to_string(),
        format!("{}/{}", info.load.slots_used, info.load.slots_capacity),
        nats,
        info.address.clone().unwrap_or_else(|| "-".into()),
    ]
}
