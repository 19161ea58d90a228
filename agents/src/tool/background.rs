//! Background subagents: the task tool's `background: true` answer, the status report that
//! `task_status` and `task_cancel` return, and the `<task_result …>` message that brings a
//! background child's result into its parent later.
//!
//! A background call returns at once with the child's session id; its envelope result carries
//! [`EXIT_RUNNING`] as `exitCode` (the run has no exit code yet). When the child ends, the runtime
//! delivers [`task_result_text`] into the parent as a synthetic user message.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::envelope::{TaskEnvelope, TaskResult, TaskUsage};
use super::redact::redact;
use super::truncate::{self, Direction, MAX_BYTES, MAX_LINES};
use super::{SubagentRequest, ToolContext, ToolError, ToolOutput};
use crate::id::SessionId;
use crate::model::ToolMetadata;

/// The `exitCode` placeholder of a background child that is still running.
pub const EXIT_RUNNING: i32 = -1;

/// Where a child session's run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildStatus {
    /// It waits for a running slot (`subagent.max_concurrent`, `subagent.max_total`).
    Queued,
    /// Its loop is running.
    Running,
    /// It finished its answer.
    Completed,
    /// Its run failed.
    Error,
    /// It was cancelled.
    Cancelled,
    /// It ran past `subagent.timeout` or `subagent.idle_timeout` and was stopped.
    Timeout,
}

impl ChildStatus {
    /// `queued`, `running`, `completed`, `error`, `cancelled` or `timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildStatus::Queued => "queued",
            ChildStatus::Running => "running",
            ChildStatus::Completed => "completed",
            ChildStatus::Error => "error",
            ChildStatus::Cancelled => "cancelled",
            ChildStatus::Timeout => "timeout",
        }
    }
}

/// What `task_status` and `task_cancel` report about a child session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildReport {
    /// The child session.
    pub session_id: SessionId,
    /// Where its run stands.
    pub status: ChildStatus,
    /// Its latest text so far (partial while running).
    pub output: String,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its own tokens, cost and assistant messages (over the background run, else all).
    pub usage: TaskUsage,
}

impl ChildReport {
    /// The tool output for the model: the report as a tagged block, redacted and cut.
    pub fn to_output(&self, title: String, ctx: &ToolContext) -> ToolOutput {
        let home = ctx.home.as_deref();
        let text = redact(&self.output, home);
        let visible =
            truncate::cut(&text, MAX_LINES, MAX_BYTES, Direction::Tail).map_or(text, |cut| {
                format!(
                    "... {} {} truncated ...\n{}",
                    cut.removed, cut.unit, cut.preview
                )
            });
        let error = self
            .error
            .as_ref()
            .map(|e| format!("error: {}\n", redact(e, home)))
            .unwrap_or_default();
        let u = &self.usage;
        let output = format!(
            "<task_status session_id=\"{}\" status=\"{}\">\n{error}usage: {} input / {} output tokens, {} turns, ${:.4}\n{visible}\n</task_status>",
            self.session_id,
            self.status.as_str(),
            u.input,
            u.output,
            u.turns,
            u.cost
        );
        let mut metadata = Map::new();
        metadata.insert("sessionId".into(), json!(self.session_id));
        metadata.insert("status".into(), json!(self.status));
        metadata.insert("usage".into(), json!(self.usage));
        ToolOutput {
            title,
            output,
            metadata: metadata.into(),
            attachments: Vec::new(),
        }
    }
}

/// The synthetic user message text that delivers a background child's result to its parent:
/// `<task_result session_id="…" status="completed|error|cancelled">…output…</task_result>`.
/// The output is redacted and cut like a foreground result.
pub fn task_result_text(
    session_id: &SessionId,
    status: ChildStatus,
    output: &str,
    error: Option<&str>,
    ctx_home: Option<&std::path::Path>,
) -> String {
    let text = redact(output, ctx_home);
    let mut body = match truncate::cut(&text, MAX_LINES, MAX_BYTES, Direction::Head) {
        None => text,
        Some(cut) => format!(
            "{}\n\n... {} {} truncated; the full text is in session {session_id} ...",
            cut.preview, cut.removed, cut.unit
        ),
    };
    if let Some(error) = error {
        let error = redact(error, ctx_home);
        body = if body.is_empty() {
            format!("error: {error}")
        } else {
            format!("{body}\n\nerror: {error}")
        };
    }
    format!(
        "<task_result session_id=\"{session_id}\" status=\"{}\">\n{body}\n</task_result>",
        status.as_str()
    )
}

/// The task tool's answer to a `background: true` call once `child` runs.
pub(crate) fn started(
    mut envelope: TaskEnvelope,
    request: &SubagentRequest,
    child: &SessionId,
) -> ToolOutput {
    envelope.results.push(TaskResult {
        agent: request.agent.clone(),
        task: request.prompt.clone(),
        exit_code: EXIT_RUNNING,
        session_id: child.to_string(),
        usage: TaskUsage::default(),
        error: None,
        output: None,
        display_items: None,
        timeout_reason: None,
    });
    let mut metadata = ToolMetadata::new();
    metadata.insert("sessionId".into(), json!(child));
    metadata.insert("model".into(), json!(request.model));
    metadata.insert("background".into(), Value::Bool(true));
    metadata.insert("status".into(), json!(ChildStatus::Running));
    metadata.set_details(envelope);
    ToolOutput {
        title: request.description.clone(),
        output: format!(
            "Subagent session {child} is running in the background (status: running). Its result will arrive later by itself, as a task_result message naming this session_id; you do not need to wait or poll for it. Use task_status to see its progress and task_cancel to stop it.\n\n<task_metadata>\nsession_id: {child}\nstatus: running\n</task_metadata>"
        ),
        metadata,
        attachments: Vec::new(),
    }
}

/// Parses a `{session_id}` argument into a session id, or a clear error.
pub(crate) fn session_arg(tool: &str, raw: &str) -> Result<SessionId, ToolError> {
    SessionId::parse(raw).map_err(|_| ToolError::InvalidArguments {
        tool: tool.to_string(),
        message: format!("session_id {raw:?} is not a session id (ses_…)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_result_text_is_tagged_and_redacted() {
        let id = SessionId::new();
        let text = task_result_text(
            &id,
            ChildStatus::Completed,
            "key sk-abcdefghijklmnopqrstuvwxyz0123",
            None,
            None,
        );
        assert!(text.starts_with(&format!(
            "<task_result session_id=\"{id}\" status=\"completed\">\n"
        )));
        assert!(text.ends_with("\n</task_result>"));
        assert!(
            !text.contains("sk-abcdefghijklmnopqrstuvwxyz0123"),
            "{text}"
        );
        let failed = task_result_text(&id, ChildStatus::Error, "", Some("boom"), None);
        assert!(failed.contains("status=\"error\""));
        assert!(failed.contains("error: boom"));
    }

    #[test]
    fn child_status_serializes_lowercase() {
        assert_eq!(json!(ChildStatus::Cancelled), json!("cancelled"));
        assert_eq!(ChildStatus::Running.as_str(), "running");
        assert_eq!(json!(ChildStatus::Queued), json!("queued"));
        assert_eq!(json!(ChildStatus::Timeout), json!("timeout"));
        assert_eq!(ChildStatus::Timeout.as_str(), "timeout");
    }
}
