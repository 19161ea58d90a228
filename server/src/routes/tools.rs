//! `/experimental/tool/ids` and `/experimental/tool`: the tools agents are offered.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use taskforce_actors::ToolListItem;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;

/// Query of `GET /experimental/tool`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolQuery {
    /// The provider of the model the tools are for.
    provider: Option<String>,
    /// The model the tools are for (with `provider`).
    model: Option<String>,
    /// The agent whose descriptions to give (taskforce's own; the default agent when absent).
    agent: Option<String>,
    /// The project directory (accepted for OpenCode's clients).
    #[allow(dead_code)]
    directory: Option<String>,
}

/// `GET /experimental/tool/ids`: the ids of every tool.
#[utoipa::path(
    get,
    path = "/experimental/tool/ids",
    operation_id = "tool.ids",
    summary = "The ids of every tool",
    responses((status = 200, body = Vec<String>))
)]
pub async fn ids(State(state): State<AppState>) -> Json<Vec<String>> {
    Json(state.runtime.tool_ids())
}

/// `GET /experimental/tool`: every tool with its description and JSON schema.
#[utoipa::path(
    get,
    path = "/experimental/tool",
    operation_id = "tool.list",
    summary = "Every tool with its description and JSON schema",
    params(ToolQuery),
    responses((status = 200, body = Vec<ToolListItem>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<ToolQuery>,
) -> Result<Json<Vec<ToolListItem>>, ApiError> {
    // A named model must exist, as OpenCode checks it.
    if let (Some(provider), Some(model)) = (&query.provider, &query.model) {
        let model = taskforce_agents::model::ModelRef::new(provider.clone(), model.clone());
        state
            .runtime
            .providers()
            .model(&model)
            .map_err(|e| ApiError::from(taskforce_actors::RuntimeError::from(e)))?;
    }
    Ok(Json(state.runtime.tools(query.agent.as_deref())?))
}
