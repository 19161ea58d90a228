//! Slash commands and prompt references: `/name args` and `@path` / `@agent` in prompt text.

use std::sync::Arc;

use async_trait::async_trait;
use taskforce_agents::agent::{AgentError, AgentMode};
use taskforce_agents::command::{ShellContext, ShellGate, render};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{AssistantError, ModelRef};
use taskforce_agents::permission::{Layers, PermissionAsk, PermissionError, merge};
use taskforce_agents::tool::BashScope;

use super::Runtime;
use crate::RuntimeError;
use crate::bus::Event;
use crate::core::Core;
use crate::session::{PartInput, PromptInput, ask_origin, prompt_parts};
use crate::store::MessageWithParts;

/// Answers the permission asks of a command template's `` !`cmd` `` through the broker, as the
/// bash tool's are answered: against the rules of the command's agent and the session, asking
/// the user (`permission.asked`) when they say `ask`.
struct TemplateGate {
    core: Arc<Core>,
    session: SessionId,
    agent: String,
    /// The command agent's rules with the session's, bounded by the session's callers.
    rules: Layers,
}

#[async_trait]
impl ShellGate for TemplateGate {
    async fn ask(&self, ask: PermissionAsk) -> Result<(), PermissionError> {
        let origin = ask_origin(&self.core, &self.session, &self.agent);
        self.core
            .broker
            .ask_from(origin, None, ask, &self.rules, || ())
            .await
    }
}

impl Runtime {
    /// Runs the command `name` with `arguments` in `session`: the
    /// template is expanded, `` !`cmd` `` replaced by the command's output (arguments inside it
    /// shell-quoted, the command asked for as a bash call of the command's agent would be: a
    /// refused one does not run and leaves its error in the text), references turned
    /// into parts; it runs as a subtask when its agent is a subagent (unless `subtask = false`)
    /// or it says `subtask = true`, else as a prompt under its agent. Answers the final message.
    pub async fn command(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
        agent: Option<&str>,
        model: Option<ModelRef>,
    ) -> Result<MessageWithParts, RuntimeError> {
        let info = self.session(session).await?;
        let command = self.core.commands.get(name)?.clone();
        let agent_name = command
            .agent
            .clone()
            .or_else(|| agent.map(str::to_string))
            // A child session runs the agent it was started for, not the default one.
            .or_else(|| info.agent.clone())
            .unwrap_or_else(|| self.core.registry.default_agent().name.clone());
        let Some(target) = self.core.registry.get(&agent_name).cloned() else {
            let available: Vec<String> = self
                .core
                .registry
                .list()
                .filter(|a| !a.hidden)
                .map(|a| a.name.clone())
                .collect();
            let message = format!(
                "Agent not found: \"{agent_name}\". Available agents: {}",
                available.join(", ")
            );
            self.core.bus.publish(Event::SessionError {
                session_id: Some(session.clone()),
                error: Some(Box::new(AssistantError::unknown(message))),
            });
            return Err(AgentError::NotFound {
                name: agent_name,
                known: available,
            }
            .into());
        };
        let command_model = command
            .model
            .as_deref()
            .map(str::parse::<ModelRef>)
            .transpose()
            .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;

        // The template's commands run under the command's agent, asked like its bash calls.
        let gate = TemplateGate {
            core: self.core.clone(),
            session: session.clone(),
            agent: target.name.clone(),
            rules: Layers::new(
                merge(&[&target.permission, info.rules()]),
                info.caller_permission.clone(),
            ),
        };
        let shell = ShellContext {
            scope: BashScope {
                directory: &info.directory,
                project_root: &self.core.paths.project_root,
                home: self.core.paths.home.as_deref(),
                rules: &target.permission,
            },
            gate: &gate,
        };
        let template = render(&command.template, arguments, shell).await;
        let parts = self.resolve_prompt(session, &template).await?;

        let subtask = (target.mode == AgentMode::Subagent && command.subtask != Some(false))
            || command.subtask == Some(true);
        let input = if subtask {
            let prompt = parts
                .iter()
                .find_map(|p| match p {
                    PartInput::Text { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            PromptInput {
                parts: vec![PartInput::Subtask {
                    prompt,
                    description: command.description.clone().unwrap_or_default(),
                    agent: agent_name,
                    // The command's model, else the subagent's; else the caller's (at run time).
                    model: command_model.or_else(|| target.model.clone()),
                    command: Some(name.to_string()),
                }],
                // The message itself stays the caller's.
                agent: agent.map(str::to_string),
                model,
                ..PromptInput::default()
            }
        } else {
            PromptInput {
                parts,
                agent: Some(agent_name),
                model: command_model.or_else(|| target.model.clone()).or(model),
                ..PromptInput::default()
            }
        };
        let answer = self.prompt(session, input).await?;
        self.core.bus.publish(Event::CommandExecuted {
            name: name.to_string(),
            session_id: session.clone(),
            arguments: arguments.to_string(),
            message_id: answer.info.id().clone(),
        });
        Ok(answer)
    }

    /// The parts of a prompt text: the text itself, then for each `@reference` the file's
    /// contents as the read tool shows them, a directory's listing, or an agent mention.
    pub async fn resolve_prompt(
        &self,
        session: &SessionId,
        text: &str,
    ) -> Result<Vec<PartInput>, RuntimeError> {
        let info = self.session(session).await?;
        let registry = &self.core.registry;
        let parts = prompt_parts(
            text,
            &info.directory,
            self.core.paths.home.as_deref(),
            |name| registry.get(name).is_some(),
        )
        .await;
        Ok(parts)
    }
}
