//! `/lsp`, `/formatter` and `/experimental/resource`: the status of services OpenCode runs
//! beside its agents (language servers, formatters, MCP resources) — taskforce has none of
//! these, so each answers its empty value (MCP servers are in `mcp`).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Map, Value};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::{ErrorBody, Object};
use super::{DirectoryQuery, check_directory};

/// `GET /experimental/resource`: MCP resources by name (none).
#[utoipa::path(
    get,
    path = "/experimental/resource",
    operation_id = "experimental.resource.list",
    summary = "MCP resources by name (taskforce reads no MCP resources)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Object), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn resources(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Map<String, Value>>, ApiError> {
    empty(&state, &q, &headers)
}

/// `GET /lsp`: language servers (none).
#[utoipa::path(
    get,
    path = "/lsp",
    operation_id = "lsp.status",
    summary = "Language servers (taskforce runs none)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<Object>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn lsp(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<Value>>, ApiError> {
    empty(&state, &q, &headers)
}

/// `GET /formatter`: formatters (none).
#[utoipa::path(
    get,
    path = "/formatter",
    operation_id = "formatter.status",
    summary = "Formatters (taskforce runs none)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<Object>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn formatter(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<Value>>, ApiError> {
    empty(&state, &q, &headers)
}

/// The empty answer, once the client's directory is checked.
fn empty<T: Default>(
    state: &AppState,
    q: &DirectoryQuery,
    headers: &HeaderMap,
) -> Result<Json<T>, ApiError> {
    check_directory(state, q.directory.as_deref(), headers)?;
    Ok(Json(T::default()))
}
