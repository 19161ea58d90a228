//! The session tree: each node's status, agent, and usage, own and rolled up.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Session};
use taskforce_agents::tool::TaskUsage;

use crate::RuntimeError;
use crate::bus::SessionStatus;
use crate::core::Core;
use crate::store::TreeSession;

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

/// Builds the tree below `root` from one read of the store (sessions and their messages, no
/// parts).
pub(crate) async fn build(core: &Core, root: Session) -> Result<SessionTree, RuntimeError> {
    let root_id = root.id.clone();
    let mut sessions = core.store.tree(&root.id).await?;
    if sessions.is_empty() {
        // Deleted meanwhile: the root alone, as it was found.
        sessions.push(TreeSession {
            session: root,
            messages: Vec::new(),
        });
    }
    let index: HashMap<&SessionId, usize, foldhash::fast::RandomState> = sessions
        .iter()
        .enumerate()
        .map(|(i, t)| (&t.session.id, i))
        .collect();
    // Each session comes after its parent: its parent's place is smaller than its own.
    let parents: Vec<Option<usize>> = sessions
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let parent = index.get(t.session.parent_id.as_ref()?)?;
            (i > 0 && *parent < i).then_some(*parent)
        })
        .collect();
    drop(index);
    let mut sessions = sessions.into_iter().map(|t| node(core, t));
    let Some(mut root) = sessions.next() else {
        return Err(RuntimeError::SessionNotFound(root_id.to_string()));
    };
    // The sessions after the root, by their place in the list less one.
    let mut rest: Vec<Option<SessionTree>> = sessions.map(Some).collect();
    // The deepest first, so that a node has all its children when it joins its parent; siblings
    // arrive youngest first and are put back in order.
    for i in (1..=rest.len()).rev() {
        let (Some(p), Some(mut child)) = (parents[i], rest[i - 1].take()) else {
            continue;
        };
        child.children.reverse();
        let parent = match p {
            0 => Some(&mut root),
            p => rest[p - 1].as_mut(),
        };
        if let Some(parent) = parent {
            parent.total_usage.add(&child.total_usage);
            parent.children.push(child);
        }
    }
    root.children.reverse();
    Ok(root)
}

/// One session's node, without its children: its status, agent and own usage.
fn node(core: &Core, tree: TreeSession) -> SessionTree {
    let mut own = TaskUsage::default();
    let mut agent = None;
    for message in &tree.messages {
        match &**message {
            Message::Assistant(a) => own.add_turn(a),
            Message::User(u) => agent = Some(u.agent.clone()),
        }
    }
    let usage = Usage::from(own);
    let status = core
        .statuses
        .get(&tree.session.id)
        .map_or(SessionStatus::Idle, |s| s.value().clone());
    SessionTree {
        info: tree.session,
        status,
        agent,
        usage,
        total_usage: usage,
        children: Vec::new(),
    }
}
