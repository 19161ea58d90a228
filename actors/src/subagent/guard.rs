//! The guards in front of the task tool: whether a session may start subagents at all, and how
//! deep it sits in its session tree.

use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;
use taskforce_agents::tool::{TaskError, TaskErrorCode};

use super::Subagents;
use crate::store::{Store, StoreError};

/// The deepest parent chain followed; deeper trees count as this deep.
const MAX_WALK: u32 = 256;

/// Why `session` may not call the task tool, if it may not: subagents switched off, or the
/// session already at `subagent.max_depth` (root = depth 0; a session at depth d may delegate
/// while d < max_depth). Sessions that fail the guard are not offered the tool; a call anyway
/// gets this error.
impl Subagents {
    pub(crate) async fn task_guard(&self, session: &Session) -> Option<TaskError> {
        let limits = &self.core.config.subagent;
        if !limits.enabled {
            return Some(TaskError::new(
                TaskErrorCode::SubagentsDisabled,
                "subagents are disabled in this configuration (subagent.enabled = false)",
            ));
        }
        let depth = self.session_depth(session).await;
        if depth >= limits.max_depth {
            return Some(TaskError::new(
                TaskErrorCode::SubagentDepthExceeded,
                format!(
                    "this session is at depth {depth} of its session tree and subagent.max_depth is {}: it cannot start subagents; do the work yourself",
                    limits.max_depth
                ),
            ));
        }
        None
    }

    /// How many ancestors `session` has (root = 0), from the parent links in the store; an
    /// ancestor missing from the store ends the chain (its child counts it, nothing above it).
    /// Depths are remembered, so a child's is its parent's plus one without reading the store.
    pub(crate) async fn session_depth(&self, session: &Session) -> u32 {
        if let Some(known) = self.depths.get(&session.id) {
            return *known;
        }
        let depth = match &session.parent_id {
            None => 0,
            Some(parent) => match self.depths.get(parent).map(|d| *d) {
                Some(parent_depth) => parent_depth.saturating_add(1),
                None => walk(&*self.core.store, session).await,
            },
        };
        self.depths.insert(session.id.clone(), depth);
        depth
    }
}

/// The depth read from the store, link by link.
async fn walk(store: &dyn Store, session: &Session) -> u32 {
    let mut depth = 0;
    let mut parent = session.parent_id.clone();
    while let Some(id) = parent {
        depth += 1;
        if depth >= MAX_WALK {
            break;
        }
        parent = match store.session(&id).await {
            Ok(Some(s)) => s.parent_id,
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(session = %id, "reading a session's parent failed: {e}");
                None
            }
        };
    }
    depth
}

/// Whether `session` is `root` or one of its descendants (as stored).
pub(crate) async fn is_within(
    store: &dyn Store,
    session: &SessionId,
    root: &SessionId,
) -> Result<bool, StoreError> {
    let mut at = Some(session.clone());
    for _ in 0..256 {
        match at {
            Some(s) if &s == root => return Ok(true),
            Some(s) => at = store.session(&s).await?.and_then(|s| s.parent_id),
            None => return Ok(false),
        }
    }
    Ok(false)
}
