//! `GET /skill`: the skills the agents may load, in OpenCode's shape.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;
#[allow(unused_imports)]
use taskforce_agents::skill::SkillInfo;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::global::to_value;
use super::{DirectoryQuery, check_directory};

/// `GET /skill`: every skill found, by name (`{name, description, location, content}`).
#[utoipa::path(
    get,
    path = "/skill",
    operation_id = "app.skills",
    summary = "Every skill the agents may load, by name",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<SkillInfo>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let registry = state.runtime.registry();
    let skills: Vec<_> = registry.skills().list().collect();
    Ok(Json(to_value(&skills)?))
}
