//! MCP servers (Model Context Protocol): each configured server is connected once per runtime,
//! in the background, and its tools are offered to models as `SERVER_TOOL` (see
//! [`mcp_tool_id`]) beside the built-in ones.
//!
//! A server that is slow to start never holds up the runtime or a prompt: its tools appear
//! when it is connected. One that fails to start, or stops later, is reported: its status
//! (`GET /mcp`), a warning in the log, and `mcp.tools.changed` as its tools go away. Servers
//! may be added, connected and disconnected while the runtime runs; all are stopped with it
//! (a local server's process is killed if it does not exit when asked).

mod connect;
mod content;
mod serve;
mod sse;
mod tool;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use taskforce_agents::config::{Config, McpConfig};
use taskforce_agents::tool::Tool;
use tokio_util::sync::CancellationToken;

use crate::bus::{BusHandle, Event};

pub use tool::mcp_tool_id;

/// Where one MCP server stands, in OpenCode's shape (`{"status": "connected"}`, `{"status":
/// "failed", "error": "…"}`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum McpStatus {
    /// Connected: its tools are offered.
    Connected,
    /// Switched off (`enabled = false`) or disconnected.
    Disabled,
    /// It could not be started or connected to, or it stopped.
    Failed {
        /// Why.
        error: String,
    },
    /// taskforce's own: the connection is being made (servers start in the background).
    Connecting,
}

/// Why an MCP request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// No server has that name.
    #[error("MCP server not found: {0}")]
    NotFound(String),
    /// The server's configuration is wrong (the message names the key).
    #[error("{0}")]
    Invalid(String),
}

/// The MCP servers of one runtime. Cheap to clone.
#[derive(Clone)]
pub struct Mcp {
    inner: Arc<Inner>,
}

/// What the servers share.
struct Inner {
    bus: BusHandle,
    /// Where local servers start.
    cwd: PathBuf,
    /// `experimental.mcp_timeout`: a tool call's limit when its server sets none.
    call_timeout: Option<u64>,
    /// Tool ids an MCP tool may not take (the built-in tools').
    reserved: Vec<String>,
    servers: Mutex<IndexMap<String, Server>>,
    /// Every connected server's tools, in the servers' order.
    tools: RwLock<Arc<[Arc<dyn Tool>]>>,
    /// Cancelled when the runtime stops: every connection ends.
    stop: CancellationToken,
}

/// One server.
struct Server {
    config: McpConfig,
    status: McpStatus,
    tools: Vec<Arc<dyn Tool>>,
    /// Bumped by every connect and disconnect: what a connection made for an older one finds
    /// out is dropped (and the connection closed).
    generation: u64,
    /// The live connection's task and what ends it.
    conn: Option<Conn>,
}

/// A connection's task and its stop signal.
struct Conn {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Mcp {
    /// The servers of `config`, each enabled one connecting in the background when `connect`
    /// (else all stay disabled until connected). `reserved` are the built-in tools' ids, which
    /// MCP tools may not shadow; local servers start in `cwd`.
    pub(crate) fn start(
        config: &Config,
        cwd: PathBuf,
        bus: BusHandle,
        reserved: Vec<String>,
        connect: bool,
    ) -> Mcp {
        let mcp = Mcp {
            inner: Arc::new(Inner {
                bus,
                cwd,
                call_timeout: config.experimental.mcp_timeout,
                reserved,
                servers: Mutex::new(IndexMap::new()),
                tools: RwLock::new(Arc::from(Vec::new())),
                stop: CancellationToken::new(),
            }),
        };
        for (name, server) in &config.mcp {
            mcp.insert(name, server.clone());
            if server.is_enabled() && connect {
                mcp.spawn_connect(name, None);
            } else if connect {
                tracing::info!(server = %name, "MCP server disabled");
            }
        }
        mcp
    }

    /// Every server's status, in configuration order (servers added later last).
    pub fn status(&self) -> IndexMap<String, McpStatus> {
        self.servers()
            .iter()
            .map(|(name, s)| (name.clone(), s.status.clone()))
            .collect()
    }

    /// The tools of every connected server, in the servers' order.
    pub fn tools(&self) -> Arc<[Arc<dyn Tool>]> {
        self.inner
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The names of the configured and added servers.
    pub fn names(&self) -> Vec<String> {
        self.servers().keys().cloned().collect()
    }

    /// Adds server `name` (replacing one of that name) and connects it unless it is switched
    /// off; returns once connected or failed.
    pub async fn add(&self, name: &str, config: McpConfig) -> Result<(), McpError> {
        config
            .check(name)
            .map_err(|e| McpError::Invalid(e.to_string()))?;
        self.disconnect_now(name);
        self.insert(name, config.clone());
        if config.is_enabled() {
            self.connect_and_wait(name).await;
        }
        Ok(())
    }

    /// Connects server `name` (again), even when it is switched off in the configuration;
    /// returns once connected or failed.
    pub async fn connect(&self, name: &str) -> Result<(), McpError> {
        if !self.servers().contains_key(name) {
            return Err(McpError::NotFound(name.to_string()));
        }
        self.disconnect_now(name);
        self.connect_and_wait(name).await;
        Ok(())
    }

    /// Disconnects server `name`: its tools go away and it shows as disabled.
    pub async fn disconnect(&self, name: &str) -> Result<(), McpError> {
        let conn = {
            let mut servers = self.servers();
            let Some(server) = servers.get_mut(name) else {
                return Err(McpError::NotFound(name.to_string()));
            };
            server.generation += 1;
            server.status = McpStatus::Disabled;
            server.conn.take()
        };
        self.tools_gone(name);
        if let Some(conn) = conn {
            conn.stop.cancel();
            let _ = tokio::time::timeout(serve::CLOSE_WAIT * 2, conn.task).await;
        }
        tracing::info!(server = %name, "MCP server disconnected");
        Ok(())
    }

    /// Stops every server and waits (a bounded time) for their connections to close; a local
    /// server that does not exit when its input closes is killed.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        let tasks: Vec<_> = self
            .servers()
            .values_mut()
            .filter_map(|s| s.conn.take())
            .map(|c| c.task)
            .collect();
        let _ = tokio::time::timeout(serve::CLOSE_WAIT * 2, futures::future::join_all(tasks)).await;
    }

    /// Tells every connection to close, without waiting (the runtime is going away).
    pub fn stop_now(&self) {
        self.inner.stop.cancel();
    }

    /// Locks the servers, tolerating a poisoned lock.
    fn servers(&self) -> MutexGuard<'_, IndexMap<String, Server>> {
        self.inner
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records server `name` with `config`, disabled until connected.
    fn insert(&self, name: &str, config: McpConfig) {
        let mut servers = self.servers();
        let generation = servers.get(name).map_or(0, |s| s.generation + 1);
        servers.insert(
            name.to_string(),
            Server {
                config,
                status: McpStatus::Disabled,
                tools: Vec::new(),
                generation,
                conn: None,
            },
        );
    }

    /// Ends server `name`'s connection, if any, without waiting for it to close.
    fn disconnect_now(&self, name: &str) {
        let conn = self.servers().get_mut(name).and_then(|s| {
            s.generation += 1;
            s.conn.take()
        });
        if let Some(conn) = conn {
            conn.stop.cancel();
            self.tools_gone(name);
        }
    }

    /// Connects `name` and waits until the attempt is over.
    async fn connect_and_wait(&self, name: &str) {
        let (done, over) = tokio::sync::oneshot::channel();
        self.spawn_connect(name, Some(done));
        let _ = over.await;
    }

    /// Starts connecting server `name` in the background; `done` hears when the attempt is
    /// over.
    fn spawn_connect(&self, name: &str, done: Option<tokio::sync::oneshot::Sender<()>>) {
        let mut servers = self.servers();
        let Some(server) = servers.get_mut(name) else {
            return;
        };
        server.generation += 1;
        server.status = McpStatus::Connecting;
        let stop = self.inner.stop.child_token();
        let attempt = serve::Attempt {
            mcp: self.clone(),
            name: name.to_string(),
            config: server.config.clone(),
            generation: server.generation,
            stop: stop.clone(),
            done,
        };
        let task = tokio::spawn(attempt.run());
        server.conn = Some(Conn { stop, task });
    }

    /// Records a connection's outcome for server `name` (when `generation` is still current):
    /// its status and tools. Answers whether it was still current.
    fn settle(
        &self,
        name: &str,
        generation: u64,
        status: McpStatus,
        tools: Vec<Arc<dyn Tool>>,
    ) -> bool {
        self.update(name, Some(generation), |server| {
            server.status = status;
            server.tools = tools;
        })
    }

    /// Server `name`'s tools are no longer offered.
    fn tools_gone(&self, name: &str) {
        self.update(name, None, |server| server.tools.clear());
    }

    /// Applies `change` to server `name` (when `generation`, if given, is still its current
    /// one); when it had or has tools, rebuilds the offered tools and publishes
    /// `mcp.tools.changed`. Answers whether the change was applied.
    fn update(
        &self,
        name: &str,
        generation: Option<u64>,
        change: impl FnOnce(&mut Server),
    ) -> bool {
        let publish = {
            let mut servers = self.servers();
            let Some(server) = servers.get_mut(name) else {
                return false;
            };
            if generation.is_some_and(|g| g != server.generation) {
                return false;
            }
            let had = !server.tools.is_empty();
            change(server);
            let publish = had || !server.tools.is_empty();
            if publish {
                self.rebuild(&servers);
            }
            publish
        };
        if publish {
            self.inner.bus.publish(Event::McpToolsChanged {
                server: name.to_string(),
            });
        }
        true
    }

    /// Rebuilds the offered tools from every server's (a tool whose id is taken, by a
    /// built-in tool or an earlier server's, is left out with a warning).
    fn rebuild(&self, servers: &IndexMap<String, Server>) {
        let mut all: Vec<Arc<dyn Tool>> = Vec::new();
        for (name, server) in servers {
            for tool in &server.tools {
                let taken = self.inner.reserved.iter().any(|r| r == tool.id())
                    || all.iter().any(|t| t.id() == tool.id());
                if taken {
                    tracing::warn!(
                        server = %name,
                        tool = tool.id(),
                        "MCP tool left out: another tool has its name"
                    );
                    continue;
                }
                all.push(tool.clone());
            }
        }
        *self
            .inner
            .tools
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::from(all);
    }
}

/// Stops the MCP servers when the last handle of a runtime goes away without a stop.
pub(crate) struct StopOnDrop(pub Mcp);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop_now();
    }
}
