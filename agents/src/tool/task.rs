//! `task {description, prompt, subagent_type, session_id?, task_id?, command?}`: runs a subagent
//! in a child session through the runtime's [`Delegate`](super::Delegate) (reference §2 F1–F12).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::run::parse_args;
use super::{SubagentRequest, Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::permission::{self, Action, PermissionAsk};

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
}

/// One line per agent the task tool may start for `caller`: every non-primary agent (hidden
/// ones included) whose `task` permission for its name is not `deny` in `caller`'s rules.
pub(crate) fn agent_lines(caller: &AgentInfo, registry: &Registry) -> Vec<String> {
    registry
        .list()
        .filter(|agent| agent.is_subagent())
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
                "command": {"type": "string", "description": "The command that triggered this task"}
            },
            "required": ["description", "prompt", "subagent_type"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        if !ctx.bypass_agent_check {
            let mut metadata = Map::new();
            metadata.insert(
                "description".into(),
                Value::String(args.description.clone()),
            );
            metadata.insert(
                "subagent_type".into(),
                Value::String(args.subagent_type.clone()),
            );
            ctx.ask(PermissionAsk {
                permission: "task".into(),
                patterns: vec![args.subagent_type.clone()],
                always: vec!["*".into()],
                metadata,
            })
            .await?;
        }
        let agent = ctx.registry.get(&args.subagent_type).ok_or_else(|| {
            ToolError::Failed(format!(
                "Unknown agent type: {} is not a valid agent type",
                args.subagent_type
            ))
        })?;
        let model = ctx
            .subtask_model
            .clone()
            .or_else(|| agent.model.clone())
            .unwrap_or_else(|| ctx.model.clone());
        let mut live = Map::new();
        live.insert("model".into(), json!(model));
        ctx.metadata(Some(args.description.clone()), live);

        let delegate = ctx
            .delegate
            .as_ref()
            .ok_or_else(|| ToolError::Failed("subagents are not available here".into()))?;
        let outcome = delegate
            .run_subagent(
                ctx,
                SubagentRequest {
                    description: args.description.clone(),
                    prompt: args.prompt,
                    agent: agent.name.clone(),
                    session_id: args.session_id.or(args.task_id),
                    command: args.command,
                    model,
                },
            )
            .await?;

        let mut metadata = Map::new();
        metadata.insert("summary".into(), Value::Array(outcome.summary));
        metadata.insert(
            "sessionId".into(),
            Value::String(outcome.session_id.to_string()),
        );
        metadata.insert("model".into(), json!(outcome.model));
        Ok(ToolOutput {
            title: args.description,
            output: format!(
                "{}\n\n<task_metadata>\nsession_id: {}\n</task_metadata>",
                outcome.text, outcome.session_id
            ),
            metadata,
        })
    }
}
