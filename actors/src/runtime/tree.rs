//! The session tree: each node's status, agent, and usage, own and rolled up.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use taskforce_agents::model::{Message, Session};
use taskforce_agents::tool::TaskUsage;

use crate::RuntimeError;
use crate::bus::SessionStatus;
use crate::core::Core;

/// Tokens and cost of a session or a subtree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Input tokens (cache reads excluded).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens read from the prompt cache.
    #[serde(rename = "cacheRead")]
    pub cache_read: u64,
    /// Tokens written to the prompt cache.
    #[serde(rename = "cacheWrite")]
    pub cache_write: u64,
    /// USD.
    pub cost: f64,
    /// Assistant messages (model turns).
    pub turns: u64,
}

impl From<TaskUsage> for Usage {
    fn from(u: TaskUsage) -> Self {
        Usage {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            cost: u.cost,
            turns: u64::from(u.turns),
        }
    }
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.cost += other.cost;
        self.turns += other.turns;
    }
}

/// One node of a session tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionTree {
    /// The session.
    pub info: Session,
    /// Its current status.
    pub status: SessionStatus,
    /// The agent of its latest user message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// This session's own usage.
    pub usage: Usage,
    /// This session's usage plus every descendant's.
    #[serde(rename = "totalUsage")]
    pub total_usage: Usage,
    /// The children, oldest first.
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub children: Vec<SessionTree>,
}

/// Builds the tree below `root` from the store.
pub(crate) fn build(
    core: &Core,
    root: Session,
) -> Pin<Box<dyn Future<Output = Result<SessionTree, RuntimeError>> + Send + '_>> {
    Box::pin(async move {
        let messages = core.store.messages(&root.id).await?;
        let mut own = TaskUsage::default();
        let mut agent = None;
        for m in &messages {
            match &*m.info {
                Message::Assistant(a) => own.add_turn(a),
                Message::User(u) => agent = Some(u.agent.clone()),
            }
        }
        let usage = Usage::from(own);
        let mut children = Vec::new();
        let mut total = usage;
        for child in core.store.children(&root.id).await? {
            let node = build(core, child).await?;
            total.add(&node.total_usage);
            children.push(node);
        }
        let status = core
            .statuses
            .get(&root.id)
            .map_or(SessionStatus::Idle, |s| s.value().clone());
        Ok(SessionTree {
            info: root,
            status,
            agent,
            usage,
            total_usage: total,
            children,
        })
    })
}
