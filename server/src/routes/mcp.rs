//! `/mcp`: the MCP servers of the runtime: their status by name, adding one, connecting and
//! disconnecting it. taskforce does not sign in to MCP servers with OAuth (a remote server's
//! token goes in its `headers`), so the `/mcp/:name/auth*` routes say so.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use taskforce_actors::mcp::{McpError, McpStatus};
use taskforce_agents::config::McpConfig;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, Query};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::{DirectoryQuery, check_directory};

/// Every server's status, by name.
type StatusMap = IndexMap<String, McpStatus>;

/// Body of `POST /mcp`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct AddBody {
    /// The server's name (its tools are named `NAME_TOOL`).
    name: String,
    /// The server, as under `[mcp.NAME]` (`type`, `command`/`url`, …).
    config: McpConfig,
}

/// The answer of `DELETE /mcp/:name/auth`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuthRemoved {
    /// Always true: taskforce keeps no MCP credentials.
    success: bool,
}

/// An MCP request's refusal as an HTTP error.
fn refused(error: McpError) -> ApiError {
    match error {
        McpError::NotFound(_) => ApiError::not_found(error.to_string()),
        McpError::Invalid(_) => ApiError::bad_request(error.to_string()),
    }
}

/// `GET /mcp`: every MCP server's status by name.
#[utoipa::path(
    get,
    path = "/mcp",
    operation_id = "mcp.status",
    summary = "Every MCP server's status, by name",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = IndexMap<String, McpStatus>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn status(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<StatusMap>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(state.runtime.mcp().status()))
}

/// `POST /mcp`: adds a server (replacing one of the same name) and connects it; answers every
/// server's status once it is connected or failed.
#[utoipa::path(
    post,
    path = "/mcp",
    operation_id = "mcp.add",
    summary = "Add an MCP server and connect it",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    request_body = AddBody,
    responses((status = 200, body = IndexMap<String, McpStatus>), (status = 400, description = "Bad request: the message names the key", body = ErrorBody))
)]
pub async fn add(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
    Body(body): Body<AddBody>,
) -> Result<Json<StatusMap>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    state
        .runtime
        .mcp()
        .add(&body.name, body.config)
        .await
        .map_err(refused)?;
    Ok(Json(state.runtime.mcp().status()))
}

/// `POST /mcp/:name/connect`: connects the server (again), even one switched off; answers
/// once it is connected or failed (`GET /mcp` says which).
#[utoipa::path(
    post,
    path = "/mcp/{name}/connect",
    operation_id = "mcp.connect",
    summary = "Connect an MCP server",
    params(("name" = String, Path, description = "The server"), ("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = bool), (status = 404, description = "No such server", body = ErrorBody))
)]
pub async fn connect(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<bool>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    state.runtime.mcp().connect(&name).await.map_err(refused)?;
    Ok(Json(true))
}

/// `POST /mcp/:name/disconnect`: disconnects the server; its tools go away.
#[utoipa::path(
    post,
    path = "/mcp/{name}/disconnect",
    operation_id = "mcp.disconnect",
    summary = "Disconnect an MCP server",
    params(("name" = String, Path, description = "The server"), ("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = bool), (status = 404, description = "No such server", body = ErrorBody))
)]
pub async fn disconnect(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<bool>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    state
        .runtime
        .mcp()
        .disconnect(&name)
        .await
        .map_err(refused)?;
    Ok(Json(true))
}

/// The answer of every OAuth route: a 404 for an unknown server, else a 400 saying taskforce
/// does no OAuth.
fn no_oauth(state: &AppState, name: &str) -> ApiError {
    if !state.runtime.mcp().names().iter().any(|n| n == name) {
        return ApiError::not_found(format!("MCP server not found: {name}"));
    }
    ApiError::bad_request(format!(
        "MCP server {name} does not support OAuth: taskforce does not sign in to MCP servers; put a token in the server's `headers` (for example Authorization = \"Bearer …\")"
    ))
}

/// `POST /mcp/:name/auth`: OAuth sign-in is not supported.
#[utoipa::path(
    post,
    path = "/mcp/{name}/auth",
    operation_id = "mcp.auth.start",
    summary = "Start an MCP server's OAuth sign-in (not supported: answers 400)",
    params(("name" = String, Path, description = "The server")),
    responses((status = 400, description = "taskforce does not sign in to MCP servers", body = ErrorBody), (status = 404, description = "No such server", body = ErrorBody))
)]
pub async fn auth_start(State(state): State<AppState>, Path(name): Path<String>) -> ApiError {
    no_oauth(&state, &name)
}

/// `POST /mcp/:name/auth/callback`: OAuth sign-in is not supported.
#[utoipa::path(
    post,
    path = "/mcp/{name}/auth/callback",
    operation_id = "mcp.auth.callback",
    summary = "Complete an MCP server's OAuth sign-in (not supported: answers 400)",
    params(("name" = String, Path, description = "The server")),
    responses((status = 400, description = "taskforce does not sign in to MCP servers", body = ErrorBody), (status = 404, description = "No such server", body = ErrorBody))
)]
pub async fn auth_callback(State(state): State<AppState>, Path(name): Path<String>) -> ApiError {
    no_oauth(&state, &name)
}

/// `POST /mcp/:name/auth/authenticate`: OAuth sign-in is not supported.
#[utoipa::path(
    post,
    path = "/mcp/{name}/auth/authenticate",
    operation_id = "mcp.auth.authenticate",
    summary = "Sign in to an MCP server with OAuth (not supported: answers 400)",
    params(("name" = String, Path, description = "The server")),
    responses((status = 400, description = "taskforce does not sign in to MCP servers", body = ErrorBody), (status = 404, description = "No such server", body = ErrorBody))
)]
pub async fn auth_authenticate(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiError {
    no_oauth(&state, &name)
}

/// `DELETE /mcp/:name/auth`: there are no OAuth credentials to remove; answers success.
#[utoipa::path(
    delete,
    path = "/mcp/{name}/auth",
    operation_id = "mcp.auth.remove",
    summary = "Remove an MCP server's OAuth credentials (taskforce keeps none)",
    params(("name" = String, Path, description = "The server")),
    responses((status = 200, body = AuthRemoved), (status = 404, description = "No such server", body = ErrorBody))
)]
pub async fn auth_remove(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<AuthRemoved>, ApiError> {
    if !state.runtime.mcp().names().iter().any(|n| n == &name) {
        return Err(ApiError::not_found(format!("MCP server not found: {name}")));
    }
    Ok(Json(AuthRemoved { success: true }))
}
