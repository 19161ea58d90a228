//! `task {tasks: [{description, prompt, subagent_type}], timeout?}`: several subagents in one
//! call (the fan-out form; `tasks` with the single form's fields, or with `background: true`, is
//! `INVALID_INPUT`).
//!
//! Every task is checked (permission `task`, agent known and startable) and run as its own
//! child under the runtime's concurrency limits; they run at once as far as those allow. One
//! child failing does not stop the others. The envelope has `mode: "parallel"` and one result
//! per task in the order given (a task refused before any child started has an empty
//! `sessionId`, exit code 1 and its `CODE: message` as `error`). The output gives each task
//! under its description: `## <description>`, then its answer (cut to its share of the output
//! limits) or its `CODE: message`, then its `<task_metadata>` block. The call fails only when
//! every task failed (the code is theirs when they share one, else `SUBAGENT_FAILED`).
//! While the children run, the part's metadata has `tasks` (each task's live metadata:
//! `description`, `sessionId`, `summary`, `queued`), `queued` (any task waiting for a slot)
//! and `summary` (all children's tool calls).

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::future::join_all;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::envelope::{
    EXIT_FAILED, TaskEnvelope, TaskError, TaskErrorCode, TaskMode, TaskResult, TaskUsage,
};
use super::run::parse_args;
use super::task::{child_result, delegation_error, failure, timeout_arg};
use super::task_start::{ask_to_start, startable};
use super::truncate::{self, Direction, MAX_BYTES, MAX_LINES};
use super::{Delegate, SubagentRequest, ToolContext, ToolError, ToolHost, ToolOutput};
use crate::id::SessionId;
use crate::model::{SUMMARY_KEY, Todo, ToolMetadata};
use crate::permission::{AskDecision, PermissionAsk, PermissionError};

const ID: &str = "task";

/// The single form's fields, which may not come with `tasks`.
const SINGLE_FIELDS: [&str; 5] = [
    "description",
    "prompt",
    "subagent_type",
    "session_id",
    "task_id",
];

#[derive(Debug, Deserialize)]
struct Args {
    tasks: Vec<OneTask>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    command: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct OneTask {
    description: String,
    prompt: String,
    subagent_type: String,
}

/// Whether `args` use the parallel form.
pub(super) fn is_parallel(args: &Value) -> bool {
    args.get("tasks").is_some_and(|t| !t.is_null())
}

/// One task's end: its result, its coded error, the text for the model.
struct Finished {
    description: String,
    result: TaskResult,
    error: Option<TaskError>,
    text: String,
}

/// Runs the parallel form.
pub(super) async fn execute(
    args: Value,
    ctx: &ToolContext,
    delegate: Arc<dyn Delegate>,
) -> Result<ToolOutput, ToolError> {
    let envelope = TaskEnvelope::new(TaskMode::Parallel);
    let invalid = |message: String| {
        let error = TaskError::new(TaskErrorCode::InvalidInput, message);
        Err(failure(envelope.clone(), error, None, ToolMetadata::new()))
    };
    if let Some(field) = SINGLE_FIELDS
        .iter()
        .find(|f| args.get(**f).is_some_and(|v| !v.is_null()))
    {
        return invalid(format!(
            "pass either tasks or description/prompt/subagent_type, not both ({field} was given with tasks)"
        ));
    }
    if args.get("background").and_then(Value::as_bool) == Some(true) {
        return invalid(
            "background is not supported with tasks; start each background child in its own task call"
                .into(),
        );
    }
    let args: Args = match parse_args(ID, args) {
        Ok(args) => args,
        Err(e) => return invalid(e.to_string()),
    };
    if args.tasks.is_empty() {
        return invalid("tasks must name at least one task".into());
    }
    let timeout = match timeout_arg(args.timeout) {
        Ok(t) => t,
        Err(error) => return Err(failure(envelope, error, None, ToolMetadata::new())),
    };
    let live = Arc::new(LiveMetadata::new(ctx.host.clone(), &args.tasks));
    let runs = args.tasks.iter().enumerate().map(|(index, one)| {
        let mut child_ctx = ctx.clone();
        child_ctx.host = Arc::new(TaskHost {
            live: live.clone(),
            index,
        });
        let delegate = delegate.clone();
        let command = args.command.clone();
        async move { run_one(&child_ctx, delegate, one.clone(), timeout, command).await }
    });
    let finished = join_all(runs).await;
    answer(envelope, finished, live.summary(), ctx)
}

/// Checks and runs one task; never fails the call.
async fn run_one(
    ctx: &ToolContext,
    delegate: Arc<dyn Delegate>,
    one: OneTask,
    timeout: Option<std::time::Duration>,
    command: Option<String>,
) -> Finished {
    let refused = |error: TaskError| Finished {
        description: one.description.clone(),
        result: TaskResult {
            agent: one.subagent_type.clone(),
            task: one.prompt.clone(),
            exit_code: EXIT_FAILED,
            session_id: String::new(),
            usage: TaskUsage::default(),
            error: Some(error.to_string()),
            timeout_reason: None,
            output: None,
            display_items: None,
        },
        text: String::new(),
        error: Some(error),
    };
    if let Err((error, _)) = ask_to_start(ctx, &one.description, &one.subagent_type).await {
        return refused(error);
    }
    let agent = match startable(ctx, &one.subagent_type) {
        Ok(agent) => agent,
        Err(error) => return refused(error),
    };
    let model = ctx
        .subtask_model
        .clone()
        .or_else(|| agent.model.clone())
        .unwrap_or_else(|| ctx.model.clone());
    let request = SubagentRequest {
        description: one.description.clone(),
        prompt: one.prompt.clone(),
        agent: agent.name.clone(),
        session_id: None,
        command,
        model,
        timeout,
    };
    match delegate.run_subagent(ctx, request).await {
        Ok(outcome) => {
            let (result, error, text) =
                child_result(&agent.name, &one.prompt, outcome, ctx.home.as_deref());
            Finished {
                description: one.description,
                result,
                error,
                text,
            }
        }
        Err(e) => refused(delegation_error(&e)),
    }
}

/// The call's answer from every task's end.
fn answer(
    mut envelope: TaskEnvelope,
    finished: Vec<Finished>,
    summary: Vec<Value>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let n = finished.len().max(1);
    let (lines, bytes) = ((MAX_LINES / n).max(1), (MAX_BYTES / n).max(1));
    let mut blocks = Vec::new();
    let mut truncated = false;
    let mut codes = Vec::new();
    for f in &finished {
        let session = &f.result.session_id;
        let mut block = format!("## {}\n", f.description);
        // An error (a timeout's output so far) gets the same share as an answer.
        let body = match &f.error {
            Some(error) => {
                codes.push(error.code);
                Cow::Owned(error.to_string())
            }
            None => Cow::Borrowed(f.text.as_str()),
        };
        match truncate::cut(&body, lines, bytes, Direction::Head) {
            None => block.push_str(&body),
            Some(cut) => {
                truncated = true;
                block.push_str(&format!(
                    "{}\n\n... {} {} truncated (the full text is in details.results and in session {session}) ...",
                    cut.preview, cut.removed, cut.unit
                ));
            }
        }
        if !session.is_empty() && !block.contains("<task_metadata>") {
            block.push_str(&format!(
                "\n\n<task_metadata>\nsession_id: {session}\n</task_metadata>"
            ));
        }
        blocks.push(block);
    }
    let output = blocks.join("\n\n");
    // Held typed when every entry is a summary item (as the runtime's children report them).
    let mut metadata = ToolMetadata::from(Map::from_iter([(
        SUMMARY_KEY.to_string(),
        Value::Array(summary),
    )]));
    metadata.insert(
        "sessionIds".into(),
        json!(
            finished
                .iter()
                .map(|f| f.result.session_id.clone())
                .collect::<Vec<_>>()
        ),
    );
    envelope.results = finished.into_iter().map(|f| f.result).collect();
    if codes.len() == n {
        let code = match codes.first() {
            Some(first) if codes.iter().all(|c| c == first) => *first,
            _ => TaskErrorCode::SubagentFailed,
        };
        let error = TaskError::new(code, format!("all {n} parallel tasks failed\n\n{output}"));
        let cause = ctx.abort.is_cancelled().then_some(ToolError::Aborted);
        return Err(failure(envelope, error, cause, metadata));
    }
    if truncated {
        envelope.error = Some(TaskError::new(
            TaskErrorCode::SubagentOutputTruncated,
            "some tasks' output was cut for the model; the full texts are in details.results",
        ));
    }
    metadata.insert("truncated".into(), Value::Bool(truncated));
    metadata.set_details(envelope);
    Ok(ToolOutput {
        title: format!("{n} parallel tasks"),
        output,
        metadata,
        attachments: Vec::new(),
    })
}

/// The call part's live metadata, gathered from every task.
struct LiveMetadata {
    host: Arc<dyn ToolHost>,
    tasks: Mutex<Vec<Map<String, Value>>>,
}

impl LiveMetadata {
    fn new(host: Arc<dyn ToolHost>, tasks: &[OneTask]) -> Self {
        let tasks = tasks
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("description".into(), json!(t.description));
                m
            })
            .collect();
        LiveMetadata {
            host,
            tasks: Mutex::new(tasks),
        }
    }

    /// Every task's child tool calls so far.
    fn summary(&self) -> Vec<Value> {
        summary_of(&self.tasks.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Merges task `index`'s update and publishes the whole.
    fn update(&self, ctx: &ToolContext, index: usize, metadata: Map<String, Value>) {
        let combined = {
            let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = tasks.get_mut(index) {
                entry.extend(metadata);
            }
            let queued = tasks
                .iter()
                .any(|t| t.get("queued") == Some(&Value::Bool(true)));
            let summary = summary_of(&tasks);
            let mut m = Map::new();
            m.insert(
                "tasks".into(),
                Value::Array(tasks.iter().cloned().map(Value::Object).collect()),
            );
            m.insert("queued".into(), Value::Bool(queued));
            m.insert("summary".into(), Value::Array(summary));
            m
        };
        self.host.set_metadata(ctx, None, combined.into());
    }
}

/// The `summary` entries of every task, in task order.
fn summary_of(tasks: &[Map<String, Value>]) -> Vec<Value> {
    tasks
        .iter()
        .filter_map(|t| t.get("summary").and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect()
}

/// A task's view of the host: its metadata goes under its index in `tasks`.
struct TaskHost {
    live: Arc<LiveMetadata>,
    index: usize,
}

#[async_trait]
impl ToolHost for TaskHost {
    async fn ask(&self, ctx: &ToolContext, ask: PermissionAsk) -> Result<(), PermissionError> {
        self.live.host.ask(ctx, ask).await
    }

    fn check(&self, ctx: &ToolContext, ask: &PermissionAsk) -> AskDecision {
        self.live.host.check(ctx, ask)
    }

    fn set_metadata(&self, ctx: &ToolContext, _title: Option<String>, metadata: ToolMetadata) {
        self.live.update(ctx, self.index, metadata.to_json());
    }

    fn store_running(&self, ctx: &ToolContext) {
        self.live.host.store_running(ctx);
    }

    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, ToolError> {
        self.live.host.todos(session).await
    }

    async fn set_todos(&self, session: &SessionId, todos: Vec<Todo>) -> Result<(), ToolError> {
        self.live.host.set_todos(session, todos).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::testing::Project;

    /// A task `name` that ended with `error` or answered `text`.
    fn ended(name: &str, error: Option<TaskError>, text: &str) -> Finished {
        Finished {
            description: name.to_string(),
            result: TaskResult {
                agent: "general".into(),
                task: name.into(),
                exit_code: if error.is_some() { EXIT_FAILED } else { 0 },
                session_id: format!("ses_{name}"),
                usage: TaskUsage::default(),
                error: error.as_ref().map(ToString::to_string),
                timeout_reason: None,
                output: error.is_none().then(|| text.to_string()),
                display_items: None,
            },
            error,
            text: text.to_string(),
        }
    }

    #[test]
    fn every_block_is_cut_to_its_share_failed_ones_too() {
        let project = Project::new();
        let big = "a line of partial output\n".repeat(6000);
        let timeout = TaskError::new(
            TaskErrorCode::SubagentTimeout,
            format!("stopped. Its output so far:\n{big}"),
        );
        let finished = vec![
            ended("one", Some(timeout.clone()), ""),
            ended("two", Some(timeout), ""),
            ended("three", None, &big),
        ];
        let out = answer(
            TaskEnvelope::new(TaskMode::Parallel),
            finished,
            Vec::new(),
            &project.ctx(),
        )
        .unwrap();
        assert!(
            out.output.len() <= MAX_BYTES + 1024,
            "{} bytes",
            out.output.len()
        );
        assert!(
            out.output
                .contains("## one\nSUBAGENT_TIMEOUT: stopped. Its output so far:\n"),
            "{}",
            &out.output[..200]
        );
        assert!(out.output.contains("## three\na line of partial output"));
        let details = out.metadata.details().unwrap();
        assert_eq!(
            details.error.as_ref().map(|e| e.code),
            Some(TaskErrorCode::SubagentOutputTruncated)
        );
        // The envelope keeps every full text.
        assert!(details.results[0].error.as_ref().unwrap().len() > big.len());
        assert_eq!(details.results[2].output.as_deref(), Some(big.as_str()));
    }
}
