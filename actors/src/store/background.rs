//! The record of a background subagent (a task call with `background: true`), kept in the
//! store until its result has been delivered into its parent.

use serde::{Deserialize, Serialize};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ModelRef;
use taskforce_agents::tool::background::ChildStatus;

/// One background child and the delivery of its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTask {
    /// The child session.
    pub child_id: SessionId,
    /// The session that started it and receives its result.
    pub parent_id: SessionId,
    /// The parent's agent, which answers the delivery.
    pub agent: String,
    /// The parent's model, which answers the delivery.
    pub model: ModelRef,
    /// When the background run started (epoch ms); usage counts from here.
    pub started: u64,
    /// Where the run stands.
    pub status: ChildStatus,
    /// The `<task_result …>` text, once the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The result is in the parent's messages.
    #[serde(default)]
    pub delivered: bool,
    /// The id of the runtime running it; a runtime that finds it running after that runtime
    /// died records it as interrupted. Absent in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}
