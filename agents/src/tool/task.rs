//! `task {description, prompt, subagent_type, session_id?, task_id?, command?}`: runs a subagent
//! in a child session through the runtime's [`Delegate`](super::Delegate).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::envelope::{
    DisplayItem, EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, TaskEnvelope, TaskError,
    TaskErrorCode, TaskMode, TaskResult, TimeoutReason,
};
use super::redact::{redact, redact_in_place, redact_titles, would_redact};
use super::run::parse_args;
use super::task_parallel;
use super::task_start::{ask_to_start, startable};
use super::truncate::{self, Direction, MAX_BYTES, MAX_LINES};
use super::{
    SubagentOutcome, SubagentRequest, SubagentStatus, TaskFailure, Tool, ToolContext, ToolError,
    ToolOutput,
};
use crate::agent::{AgentInfo, Registry};
use crate::model::{ToolInput, ToolMetadata};
use crate::permission::{self, Action};

const ID: &str = "task";

/// The listing line of an agent without a description.
pub(crate) const NO_DESCRIPTION: &str = "This subagent should only be called manually by the user.";

/// The heading above the agent listing in the description.
pub(crate) const AGENTS_HEADING: &str = "Available agent types and the tools they have access to:";

/// The task tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskTool;

#[derive(Debug, Deserialize)]
struct Args {
    description: String,
    prompt: String,
    subagent_type: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    background: bool,
    /// Seconds; lowers `subagent.timeout` for this call.
    #[serde(default)]
    timeout: Option<f64>,
}

/// The call's `timeout` argument (seconds) as a duration; `None` when absent.
pub(super) fn timeout_arg(seconds: Option<f64>) -> Result<Option<Duration>, TaskError> {
    let Some(s) = seconds else { return Ok(None) };
    // Too long to hold is as good as no lower cap: the configured one applies.
    let asked =
        (s.is_finite() && s > 0.0).then(|| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX));
    match asked {
        Some(d) if !d.is_zero() => Ok(Some(d)),
        _ => Err(TaskError::new(
            TaskErrorCode::InvalidInput,
            format!("timeout must be a positive number of seconds, got {s}"),
        )),
    }
}

/// One line per agent the task tool may start for `caller`: every non-primary agent (hidden
/// ones included) whose `task` permission for its name is not `deny` in `caller`'s rules.
pub(crate) fn agent_lines(caller: &AgentInfo, registry: &Registry) -> Vec<String> {
    registry
        .list()
        .filter(|agent| agent.is_subagent() && !agent.disable_task)
        .filter(|agent| {
            permission::evaluate("task", &agent.name, &[&caller.permission]).action != Action::Deny
        })
        .map(|agent| {
            format!(
                "- {}: {}",
                agent.name,
                agent.description.as_deref().unwrap_or(NO_DESCRIPTION)
            )
        })
        .collect()
}

#[async_trait]
impl Tool for TaskTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, caller: &AgentInfo, registry: &Registry) -> String {
        format!(
            "{}\n\n{AGENTS_HEADING}\n{}",
            include_str!("descriptions/task.txt").trim_end(),
            agent_lines(caller, registry).join("\n")
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short (3-5 words) description of the task"},
                "prompt": {"type": "string", "description": "The task for the agent to perform"},
                "subagent_type": {"type": "string", "description": "The type of specialized agent to use for this task"},
                "session_id": {"type": "string", "description": "An existing task session to continue (from a previous task's <task_metadata>)"},
                "task_id": {"type": "string", "description": "Same as session_id (kept for compatibility)"},
                "command": {"type": "string", "description": "The command that triggered this task"},
                "background": {"type": "boolean", "description": "Run the subagent in the background: returns its session_id at once; its result arrives later as a <task_result> message (see task_status, task_cancel). Single form only, not with tasks"},
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Instead of description/prompt/subagent_type: several independent tasks to run at once, each in its own subagent session. One result per task comes back under its description",
                    "items": {
                        "type": "object",
                        "properties": {
                            "description": {"type": "string", "description": "A short (3-5 words) description of the task"},
                            "prompt": {"type": "string", "description": "The task for the agent to perform"},
                            "subagent_type": {"type": "string", "description": "The type of specialized agent to use for this task"}
                        },
                        "required": ["description", "prompt", "subagent_type"]
                    }
                },
                "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Optional: the most seconds this task may run (fractions allowed, e.g. 90 or 0.5). It can only lower the configured subagent.timeout, never raise it. A task that runs out answers SUBAGENT_TIMEOUT with its output so far"}
            },
            // Either description + prompt + subagent_type, or tasks; checked in `execute` (some
            // providers refuse a top-level anyOf).
            "required": []
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut envelope = TaskEnvelope::new(TaskMode::Single);
        // Guards first: a session that may not delegate learns it whatever it asked for.
        let Some(delegate) = ctx.delegate.clone() else {
            envelope.mode = TaskMode::Management;
            let error = TaskError::new(
                TaskErrorCode::SubagentsDisabled,
                "subagents are not available here",
            );
            return Err(failure(envelope, error, None, ToolMetadata::new()));
        };
        if let Err(error) = delegate.admit(ctx).await {
            envelope.mode = TaskMode::Management;
            return Err(failure(envelope, error, None, ToolMetadata::new()));
        }
        if task_parallel::is_parallel(&args) {
            return task_parallel::execute(args, ctx, delegate).await;
        }
        let args: Args = match parse_args(ID, args) {
            Ok(args) => args,
            Err(e) => {
                let error = TaskError::new(TaskErrorCode::InvalidInput, e.to_string());
                return Err(failure(envelope, error, Some(e), ToolMetadata::new()));
            }
        };
        let timeout = match timeout_arg(args.timeout) {
            Ok(t) => t,
            Err(error) => return Err(failure(envelope, error, None, ToolMetadata::new())),
        };
        if let Err((error, e)) = ask_to_start(ctx, &args.description, &args.subagent_type).await {
            return Err(failure(envelope, error, Some(e), ToolMetadata::new()));
        }
        let agent = match startable(ctx, &args.subagent_type) {
            Ok(agent) => agent,
            Err(error) => return Err(failure(envelope, error, None, ToolMetadata::new())),
        };
        let model = ctx
            .subtask_model
            .clone()
            .or_else(|| agent.model.clone())
            .unwrap_or_else(|| ctx.model.clone());
        // Serialized once: shown now, and kept for the result's metadata.
        let model_json = json!(model);
        let mut live = Map::new();
        live.insert("model".into(), model_json.clone());
        ctx.metadata(Some(args.description.clone()), live);

        let request = SubagentRequest {
            description: args.description.clone(),
            prompt: args.prompt.clone(),
            agent: agent.name.clone(),
            session_id: args.session_id.or(args.task_id),
            command: args.command,
            model,
            timeout,
        };
        if args.background {
            return match delegate.start_background(ctx, request.clone()).await {
                Ok(child) => Ok(super::background::started(envelope, &request, &child)),
                Err(e) => Err(coded(envelope, e)),
            };
        }
        let outcome = match delegate.run_subagent(ctx, request).await {
            Ok(outcome) => outcome,
            Err(e) => return Err(coded(envelope, e)),
        };
        finish(
            envelope,
            &agent.name,
            &args.prompt,
            args.description,
            outcome,
            model_json,
            ctx,
        )
    }

    fn handles_abort(&self) -> bool {
        true
    }

    fn changes_files(&self) -> bool {
        false
    }
}

/// The coded error of a delegation that did not give a child: the runtime's own code (a limit
/// reached) as it is, otherwise cancelled, permission denied or failed.
pub(super) fn delegation_error(e: &ToolError) -> TaskError {
    if let ToolError::Task(f) = e {
        return f.error.clone();
    }
    let code = if e.is_aborted() {
        TaskErrorCode::SubagentCancelled
    } else if matches!(e.cause(), ToolError::Permission(_)) {
        TaskErrorCode::PermissionDenied
    } else {
        TaskErrorCode::SubagentFailed
    };
    TaskError::new(code, e.to_string())
}

/// [`delegation_error`] as the call's failure, with the runtime's metadata when it gave some.
fn coded(envelope: TaskEnvelope, e: ToolError) -> ToolError {
    if let ToolError::Task(f) = e {
        return failure(envelope, f.error, f.cause, f.metadata);
    }
    let error = delegation_error(&e);
    failure(envelope, error, Some(e), ToolMetadata::new())
}

/// The coded error of a failed call, its envelope under `details` beside `metadata`.
pub(super) fn failure(
    mut envelope: TaskEnvelope,
    error: TaskError,
    cause: Option<ToolError>,
    mut metadata: ToolMetadata,
) -> ToolError {
    envelope.error = Some(error.clone());
    metadata.set_details(envelope);
    ToolError::Task(Box::new(TaskFailure {
        error,
        metadata,
        cause,
    }))
}

/// The tool's answer for a child that ran (with the JSON of the model it was asked to run on):
/// its output on success, a coded error otherwise.
/// Everything taken from the child is redacted (see [`redact`]) before it reaches the parent;
/// the model's copy of the output is then cut to [`MAX_LINES`] lines / [`MAX_BYTES`] bytes
/// (`SUBAGENT_OUTPUT_TRUNCATED`), while `details.results[].output` keeps the whole redacted
/// text. The child's own stored messages are left as they are.
fn finish(
    mut envelope: TaskEnvelope,
    agent: &str,
    task: &str,
    title: String,
    mut outcome: SubagentOutcome,
    model_json: Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let home = ctx.home.as_deref();
    let session_id = outcome.session_id.to_string();
    let mut metadata = ToolMetadata::new();
    redact_titles(&mut outcome.summary, home);
    metadata.set_summary(std::mem::take(&mut outcome.summary));
    // A few keys: found by comparison, not hashing.
    let field = |key: &str| {
        model_json
            .as_object()
            .and_then(|m| m.iter().find_map(|(k, v)| (k == key).then_some(v)))
            .and_then(Value::as_str)
    };
    let asked = field("providerID") == Some(outcome.model.provider_id.as_str())
        && field("modelID") == Some(outcome.model.model_id.as_str());
    let model_json = if asked {
        model_json
    } else {
        json!(outcome.model)
    };
    // In the order the running call's metadata has them (model, then sessionId), so that the
    // final metadata replaces it whole.
    metadata.insert("model".into(), model_json);
    metadata.insert("sessionId".into(), Value::String(session_id.clone()));
    let (result, error, text) = child_result(agent, task, outcome, home);
    envelope.results.push(result);
    if let Some(error) = error {
        let cause = ctx.abort.is_cancelled().then_some(ToolError::Aborted);
        return Err(failure(envelope, error, cause, metadata));
    }
    let visible = match truncate::cut(&text, MAX_LINES, MAX_BYTES, Direction::Head) {
        None => text,
        Some(cut) => {
            let error = TaskError::new(
                TaskErrorCode::SubagentOutputTruncated,
                format!(
                    "the subagent's output was cut to {MAX_LINES} lines / {} KB for the model ({} {} removed); the full text is in details.results[0].output and in session {session_id}",
                    MAX_BYTES / 1024,
                    cut.removed,
                    cut.unit
                ),
            );
            let note = format!(
                "{}\n\n... {} {} truncated ...\n\n[{error}. Continue that session with session_id {session_id} to ask for the part you need.]",
                cut.preview, cut.removed, cut.unit
            );
            envelope.error = Some(error);
            note
        }
    };
    metadata.insert("truncated".into(), Value::Bool(envelope.error.is_some()));
    metadata.set_details(envelope);
    Ok(ToolOutput {
        title,
        output: format!("{visible}\n\n<task_metadata>\nsession_id: {session_id}\n</task_metadata>"),
        metadata,
        attachments: Vec::new(),
    })
}

/// One child's entry in `details.results`, its coded error (when its run did not finish) and
/// its redacted text.
pub(super) fn child_result(
    agent: &str,
    task: &str,
    outcome: SubagentOutcome,
    home: Option<&std::path::Path>,
) -> (TaskResult, Option<TaskError>, String) {
    let session_id = outcome.session_id.to_string();
    let (exit_code, error) = match &outcome.status {
        SubagentStatus::Completed => (EXIT_OK, None),
        SubagentStatus::Failed(message) => (
            EXIT_FAILED,
            Some(TaskError::new(
                TaskErrorCode::SubagentFailed,
                redact(message, home),
            )),
        ),
        SubagentStatus::Cancelled => (
            EXIT_CANCELLED,
            Some(TaskError::new(
                TaskErrorCode::SubagentCancelled,
                [
                    "Tool execution aborted: subagent session ",
                    &session_id,
                    " was cancelled",
                ]
                .concat(),
            )),
        ),
        SubagentStatus::TimedOut { reason, after } => (
            EXIT_TIMEOUT,
            Some(timeout_error(
                &session_id,
                *reason,
                *after,
                &redact(&outcome.text, home),
            )),
        ),
    };
    let timeout_reason = match &outcome.status {
        SubagentStatus::TimedOut { reason, .. } => Some(*reason),
        _ => None,
    };
    let mut text = outcome.text;
    redact_in_place(&mut text, home);
    let mut display_items = outcome.display_items;
    for item in &mut display_items {
        match item {
            DisplayItem::Text { text } => redact_in_place(text, home),
            DisplayItem::ToolCall { args, .. } => redact_input(args, home),
        }
    }
    let result = TaskResult {
        agent: agent.to_string(),
        task: task.to_string(),
        exit_code,
        session_id: session_id.clone(),
        usage: outcome.usage,
        error: error.as_ref().map(|e| e.message.clone()),
        timeout_reason,
        output: (!text.is_empty() || error.is_none()).then(|| text.clone()),
        display_items: Some(display_items),
    };
    (result, error, text)
}

/// `SUBAGENT_TIMEOUT` for a child that ran past its `reason` limit of `after`, with the
/// (redacted) output it had written so far, cut for the model.
pub(super) fn timeout_error(
    session_id: &str,
    reason: TimeoutReason,
    after: Duration,
    partial: &str,
) -> TaskError {
    let what = match reason {
        TimeoutReason::Runtime => format!(
            "ran longer than its limit of {} (subagent.timeout or the call's timeout)",
            humantime::format_duration(after)
        ),
        TimeoutReason::Idle => format!(
            "had no model or tool activity for {} (subagent.idle_timeout)",
            humantime::format_duration(after)
        ),
    };
    let mut message = format!(
        "subagent session {session_id} {what} and was stopped (timeoutReason: {}).",
        reason.as_str()
    );
    if partial.trim().is_empty() {
        message.push_str(" It had written no output yet.");
    } else {
        let shown = truncate::cut(partial, MAX_LINES, MAX_BYTES, Direction::Tail)
            .map_or_else(|| partial.to_string(), |c| c.preview);
        message.push_str(&format!(" Its output so far:\n{shown}"));
    }
    message.push_str(&format!(
        "\n\n<task_metadata>\nsession_id: {session_id}\n</task_metadata>"
    ));
    TaskError::new(TaskErrorCode::SubagentTimeout, message)
}

/// Redacts every string of a call's input; an input with nothing to redact stays shared with
/// the child's part (checked before it is copied to be changed).
fn redact_input(input: &mut ToolInput, home: Option<&std::path::Path>) {
    if input.values().any(|v| would_redact_json(v, home)) {
        input.values_mut().for_each(|v| redact_json(v, home));
    }
}

/// Whether [`redact_json`] may change some string in `value`.
fn would_redact_json(value: &Value, home: Option<&std::path::Path>) -> bool {
    match value {
        Value::String(s) => would_redact(s, home),
        Value::Array(items) => items.iter().any(|v| would_redact_json(v, home)),
        Value::Object(map) => map.values().any(|v| would_redact_json(v, home)),
        _ => false,
    }
}

/// Redacts every string in `value`, in place.
fn redact_json(value: &mut Value, home: Option<&std::path::Path>) {
    match value {
        Value::String(s) => redact_in_place(s, home),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_json(v, home)),
        Value::Object(map) => map.values_mut().for_each(|v| redact_json(v, home)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;

    fn input(value: Value) -> ToolInput {
        ToolInput::from(value.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn a_display_input_without_secrets_stays_shared_with_the_childs_part() {
        let part = input(json!({"prompt": "split it up", "list": ["short", "texts"]}));
        let mut shown = part.clone();
        redact_input(&mut shown, Some(Path::new("/home/me")));
        assert!(shown.shares(&part));
    }

    #[test]
    fn a_display_input_with_a_secret_is_redacted_in_a_copy() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789";
        let part = input(
            json!({"command": format!("curl -H 'Authorization: Bearer {key}'"), "nested": {"path": "/home/me/notes"}}),
        );
        let mut shown = part.clone();
        redact_input(&mut shown, Some(Path::new("/home/me")));
        assert!(!shown.shares(&part));
        assert!(!shown["command"].as_str().unwrap().contains(key));
        assert_eq!(shown["nested"]["path"], "~/notes");
        // The child's own part keeps what it ran.
        assert!(part["command"].as_str().unwrap().contains(key));
    }

    #[test]
    fn the_timeout_argument_is_positive_seconds_and_a_huge_one_is_no_lower_cap() {
        assert_eq!(timeout_arg(None).unwrap(), None);
        assert_eq!(
            timeout_arg(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(timeout_arg(Some(1e300)).unwrap(), Some(Duration::MAX));
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY, 1e-12] {
            let e = timeout_arg(Some(bad)).unwrap_err();
            assert_eq!(e.code, TaskErrorCode::InvalidInput, "{bad}");
            assert!(e.message.contains("positive number of seconds"), "{bad}");
        }
    }
}
