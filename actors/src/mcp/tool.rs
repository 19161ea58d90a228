//! One MCP server tool as a taskforce tool: named `SERVER_TOOL`, asked about under that name,
//! called with the server's timeout, cancelled on the server when the call is aborted.

use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::{Map, Value};
use taskforce_agents::agent::{AgentInfo, Registry};
use taskforce_agents::permission::PermissionAsk;
use taskforce_agents::tool::{Tool, ToolContext, ToolError, ToolOutput};

use super::content;
pub use taskforce_agents::config::mcp_tool_id;

/// A tool of a connected MCP server.
pub(super) struct McpTool {
    /// `SERVER_TOOL`.
    id: String,
    /// The server's name.
    server: String,
    /// The tool's name on the server.
    name: String,
    description: String,
    schema: Value,
    peer: Peer<RoleClient>,
    /// How long a call may take (reset by the server's progress notices).
    timeout: Duration,
}

impl McpTool {
    /// `tool` of server `server`, called through `peer` with `timeout`.
    pub(super) fn new(
        server: &str,
        tool: &rmcp::model::Tool,
        peer: Peer<RoleClient>,
        timeout: Duration,
    ) -> McpTool {
        McpTool {
            id: mcp_tool_id(server, &tool.name),
            server: server.to_string(),
            name: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_string(),
            schema: schema(&tool.input_schema),
            peer,
            timeout,
        }
    }
}

/// The server's input schema as offered to models: an object with `properties` (empty when the
/// server gives none) and no other properties (as OpenCode offers it).
fn schema(input: &Map<String, Value>) -> Value {
    let mut schema = input.clone();
    schema.insert("type".into(), Value::String("object".into()));
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema.insert("properties".into(), Value::Object(Map::new()));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(schema)
}

#[async_trait]
impl Tool for McpTool {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn handles_abort(&self) -> bool {
        true
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.ask(PermissionAsk {
            permission: self.id.clone(),
            patterns: vec!["*".into()],
            always: vec!["*".into()],
            force_ask: false,
            metadata: Map::new(),
        })
        .await?;
        let arguments = match args {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(self.name.clone()).with_arguments(arguments),
        ));
        let options = PeerRequestOptions::with_timeout(self.timeout).reset_timeout_on_progress();
        let handle = tokio::select! {
            sent = self.peer.send_request_with_option(request, options) => {
                sent.map_err(|e| self.failure(e))?
            }
            () = ctx.abort.cancelled() => return Err(ToolError::Aborted),
        };
        let id = handle.id.clone();
        let answer = tokio::select! {
            answer = handle.await_response() => answer,
            () = ctx.abort.cancelled() => {
                // The server is told, so that it can stop the work.
                let peer = self.peer.clone();
                tokio::spawn(async move {
                    let notice = CancelledNotification::new(
                        CancelledNotificationParam::new(Some(id), Some("cancelled by the user".into())),
                    );
                    let _ = peer
                        .send_notification(ClientNotification::CancelledNotification(notice))
                        .await;
                });
                return Err(ToolError::Aborted);
            }
        };
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(_) => {
                return Err(ToolError::Failed(format!(
                    "MCP server {} answered the call of {} with something that is not a tool result",
                    self.server, self.name
                )));
            }
            Err(e) => return Err(self.failure(e)),
        };
        let mapped = content::map(&result);
        if result.is_error == Some(true) {
            let text = if mapped.text.is_empty() {
                format!("MCP tool {} of server {} failed", self.name, self.server)
            } else {
                mapped.text
            };
            return Err(ToolError::Failed(text));
        }
        Ok(ToolOutput {
            title: String::new(),
            output: mapped.text,
            metadata: Default::default(),
            attachments: mapped.attachments,
        })
    }
}

impl McpTool {
    /// The error the model reads when a call could not be made or answered.
    fn failure(&self, error: ServiceError) -> ToolError {
        ToolError::Failed(match error {
            // The JSON-RPC error as MCP clients show it.
            ServiceError::McpError(e) => format!("MCP error {}: {}", e.code.0, e.message),
            ServiceError::Timeout { timeout } => format!(
                "MCP error -32001: Request timed out (no answer from MCP server {} in {} ms)",
                self.server,
                timeout.as_millis()
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => format!(
                "MCP server {} is not connected (its connection closed)",
                self.server
            ),
            other => format!("MCP server {}: {other}", self.server),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schemas_are_closed_objects_with_properties() {
        let given =
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
        let offered = schema(given.as_object().unwrap());
        assert_eq!(
            offered,
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": false})
        );
        let bare = schema(&Map::new());
        assert_eq!(
            bare,
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }
}
