//! Running one tool call: its context, the embedders' hooks around it, the tool itself.

use std::sync::Arc;

use serde_json::Value;
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::MessageId;
use taskforce_agents::model::{ModelRef, Session};
use taskforce_agents::tool::{
    Delegate, Tool, ToolContext, ToolError, ToolHost, ToolOutput, run_tool,
};
use tokio_util::sync::CancellationToken;

use crate::core::Core;
use crate::hooks::{self, HookCall};

/// Who makes a call and where: everything a [`ToolContext`] needs but the call's own id.
pub(crate) struct CallSite<'a> {
    pub core: &'a Arc<Core>,
    pub session: &'a Arc<Session>,
    pub agent: Arc<AgentInfo>,
    pub model: ModelRef,
    pub message_id: MessageId,
    pub token: &'a CancellationToken,
}

impl CallSite<'_> {
    /// The context of call `call_id`, with `host` serving it and `delegate` (see
    /// [`delegate`]) starting its subagents.
    pub fn context(
        &self,
        call_id: String,
        host: Arc<dyn ToolHost>,
        delegate: Option<Arc<dyn Delegate>>,
        bypass_agent_check: bool,
        subtask_model: Option<ModelRef>,
    ) -> ToolContext {
        ToolContext {
            session_id: self.session.id.clone(),
            message_id: self.message_id.clone(),
            call_id,
            agent: self.agent.clone(),
            model: self.model.clone(),
            directory: self.session.directory.clone(),
            project_root: self.core.paths.project_root.clone(),
            data_dir: self.core.paths.data_dir.clone(),
            home: self.core.paths.home.clone(),
            abort: self.token.child_token(),
            bypass_agent_check,
            subtask_model,
            registry: self.core.registry.clone(),
            host,
            delegate,
        }
    }
}

/// What starts the subagents of `session`'s task calls; one serves all calls of a step.
pub(crate) fn delegate(core: &Arc<Core>, session: &Arc<Session>) -> Option<Arc<dyn Delegate>> {
    core.children()
        .map(|children| children.clone().delegate(session.clone()))
}

/// Runs `tool` with the hooks around it: `before` may rewrite the arguments or refuse the call
/// (the reason is the error the model sees), `after` may rewrite a successful output.
pub(crate) async fn call_tool(
    core: &Core,
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let hooks = core.hooks();
    if hooks.is_empty() {
        return run_tool(tool, args, ctx).await;
    }
    let call = HookCall {
        tool: tool.id(),
        session: &ctx.session_id,
        call_id: &ctx.call_id,
        agent: &ctx.agent.name,
    };
    let mut args = args;
    hooks::before(&hooks, &call, &mut args)
        .await
        .map_err(ToolError::Failed)?;
    let mut output = run_tool(tool, args, ctx).await?;
    hooks::after(&hooks, &call, &mut output).await;
    Ok(output)
}
