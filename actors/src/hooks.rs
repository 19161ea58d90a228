//! Hooks for embedders: the Rust counterpart of OpenCode's plugin triggers.
//!
//! Register hooks with [`crate::Runtime::add_hooks`]. They run in registration order for every
//! tool call (command subtasks included) and every model request.

use async_trait::async_trait;
use serde_json::Value;
use taskforce_agents::id::SessionId;
use taskforce_agents::provider::ModelRequest;
use taskforce_agents::tool::ToolOutput;

/// A tool call, as hooks see it.
#[derive(Debug, Clone, Copy)]
pub struct HookCall<'a> {
    /// The tool's id (`bash`, `task`…).
    pub tool: &'a str,
    /// The session making the call.
    pub session: &'a SessionId,
    /// The call's id.
    pub call_id: &'a str,
    /// The agent making the call.
    pub agent: &'a str,
}

/// Code that watches or changes tool calls and model requests.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// Before a tool runs: may rewrite `args`, or refuse the call; the reason is what the model
    /// sees as the tool's error.
    async fn tool_execute_before(
        &self,
        call: &HookCall<'_>,
        args: &mut Value,
    ) -> Result<(), String> {
        let _ = (call, args);
        Ok(())
    }

    /// After a tool ran without error: may rewrite its title, output or metadata.
    async fn tool_execute_after(&self, call: &HookCall<'_>, output: &mut ToolOutput) {
        let _ = (call, output);
    }

    /// Before a model call: may change the system prompt, the messages or the parameters.
    fn chat_request(&self, session: &SessionId, agent: &str, request: &mut ModelRequest) {
        let _ = (session, agent, request);
    }
}

/// Runs the `before` hooks in order; the first refusal wins.
pub(crate) async fn before(
    hooks: &[std::sync::Arc<dyn Hooks>],
    call: &HookCall<'_>,
    args: &mut Value,
) -> Result<(), String> {
    for hook in hooks {
        hook.tool_execute_before(call, args).await?;
    }
    Ok(())
}

/// Runs the `after` hooks in order.
pub(crate) async fn after(
    hooks: &[std::sync::Arc<dyn Hooks>],
    call: &HookCall<'_>,
    output: &mut ToolOutput,
) {
    for hook in hooks {
        hook.tool_execute_after(call, output).await;
    }
}
