//! The tools the runtime offers, as clients list them.

use serde::Serialize;

use super::Runtime;
use crate::RuntimeError;

/// A tool as a client lists it: its id, its description for an agent, and its JSON schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolListItem {
    /// The id the model calls it by.
    pub id: String,
    /// What the model is told of it.
    pub description: String,
    /// The JSON schema of its arguments.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub parameters: serde_json::Value,
}

impl Runtime {
    /// The ids of every tool the runtime has.
    pub fn tool_ids(&self) -> Vec<String> {
        self.core.tools.iter().map(|t| t.id().to_string()).collect()
    }

    /// Every tool with its description as `agent` (the default agent when none) is told it.
    pub fn tools(&self, agent: Option<&str>) -> Result<Vec<ToolListItem>, RuntimeError> {
        let agent = match agent {
            Some(name) => self.core.registry.require(name)?,
            None => self.core.registry.default_agent(),
        };
        Ok(self
            .core
            .tools
            .iter()
            .map(|t| ToolListItem {
                id: t.id().to_string(),
                description: self.core.description(t.as_ref(), agent).to_string(),
                parameters: (*self.core.schema(t.as_ref())).clone(),
            })
            .collect())
    }
}
