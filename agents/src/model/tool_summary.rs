//! The `summary` key of a task call's metadata: the child's tool calls as the parent shows them.

use serde::{Deserialize, Serialize};

use super::ToolState;

/// The metadata key holding the summary.
pub const SUMMARY_KEY: &str = "summary";

/// One tool call of a child session: `{id, tool, state: {status, title?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryItem {
    /// The child's tool part.
    pub id: String,
    /// The tool called.
    pub tool: String,
    /// Where the call is.
    pub state: SummaryState,
}

/// The status and title of a summarized call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryState {
    /// `pending`, `running`, `completed` or `error`.
    pub status: ToolStatus,
    /// The call's title, once it has one (running with a title, or completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The `status` tag of a tool state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// Called, not started.
    Pending,
    /// Running.
    Running,
    /// Ended with an output.
    Completed,
    /// Ended with an error.
    Error,
}

impl ToolStatus {
    /// The status of `state`.
    pub fn of(state: &ToolState) -> Self {
        match state {
            ToolState::Pending(_) => ToolStatus::Pending,
            ToolState::Running(_) => ToolStatus::Running,
            ToolState::Completed(_) => ToolStatus::Completed,
            ToolState::Error(_) => ToolStatus::Error,
        }
    }

    /// The tag as it is written: `pending`, `running`, `completed` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Pending => "pending",
            ToolStatus::Running => "running",
            ToolStatus::Completed => "completed",
            ToolStatus::Error => "error",
        }
    }
}

impl SummaryItem {
    /// The summary of call `id` to `tool` in `state`.
    pub fn of(id: &str, tool: &str, state: &ToolState) -> Self {
        let title = match state {
            ToolState::Running(r) => r.title.clone(),
            ToolState::Completed(c) => Some(c.title.clone()),
            _ => None,
        };
        SummaryItem {
            id: id.to_string(),
            tool: tool.to_string(),
            state: SummaryState {
                status: ToolStatus::of(state),
                title,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{CompletedTime, ToolStateCompleted};

    #[test]
    fn serializes_as_the_summary_entries_opencode_shows() {
        let state = ToolState::Completed(ToolStateCompleted {
            input: Default::default(),
            output: "x".into(),
            title: "notes.txt".into(),
            metadata: Default::default(),
            time: CompletedTime {
                start: 1,
                end: 2,
                compacted: None,
            },
            attachments: None,
        });
        let item = SummaryItem::of("prt_1", "read", &state);
        let v = serde_json::to_value(&item).unwrap();
        assert_eq!(
            v,
            json!({"id": "prt_1", "tool": "read", "state": {"status": "completed", "title": "notes.txt"}})
        );
        assert_eq!(serde_json::from_value::<SummaryItem>(v).unwrap(), item);
        let pending = SummaryItem::of("prt_2", "bash", &ToolState::Pending(Default::default()));
        assert_eq!(
            serde_json::to_value(&pending).unwrap(),
            json!({"id": "prt_2", "tool": "bash", "state": {"status": "pending"}})
        );
    }

    #[test]
    fn a_status_is_written_as_its_tag() {
        for status in [
            ToolStatus::Pending,
            ToolStatus::Running,
            ToolStatus::Completed,
            ToolStatus::Error,
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }

    #[test]
    fn an_entry_with_other_fields_is_no_summary_item() {
        let v = json!({"id": "p", "tool": "t", "state": {"status": "running"}, "extra": 1});
        assert!(serde_json::from_value::<SummaryItem>(v).is_err());
        let v = json!({"id": "p", "tool": "t", "state": {"status": "paused"}});
        assert!(serde_json::from_value::<SummaryItem>(v).is_err());
    }
}
