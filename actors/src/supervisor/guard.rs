//! The guards in front of the task tool: whether a session may start subagents at all.

use taskforce_agents::model::Session;
use taskforce_agents::tool::{TaskError, TaskErrorCode};

use crate::core::Core;

/// Why `session` may not call the task tool, if it may not: subagents switched off.
/// Sessions that fail the guard are not offered the tool; a call anyway gets this error.
pub(crate) async fn task_guard(core: &Core, _session: &Session) -> Option<TaskError> {
    if !core.config.subagent.enabled {
        return Some(TaskError::new(
            TaskErrorCode::SubagentsDisabled,
            "subagents are disabled in this configuration (subagent.enabled = false)",
        ));
    }
    None
}
