//! Permission asks: the pending list and replies (current and deprecated routes).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_agents::id::PermissionId;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, path_id};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::session::session_id;

/// `GET /permission`: every pending ask, oldest first.
#[utoipa::path(
    get,
    path = "/permission",
    operation_id = "permission.list",
    summary = "Every pending permission ask",
    responses((status = 200, body = Vec<PermissionRequest>))
)]
pub async fn list(State(state): State<AppState>) -> Json<Vec<PermissionRequest>> {
    Json(state.runtime.pending_permissions().await)
}

/// Body of `POST /permission/:id/reply`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ReplyBody {
    reply: PermissionReply,
    /// With `reject`: a correction the model sees, and the loop continues.
    message: Option<String>,
}

/// `POST /permission/:id/reply`.
#[utoipa::path(
    post,
    path = "/permission/{requestID}/reply",
    operation_id = "permission.reply",
    summary = "Answer a permission ask",
    params(("requestID" = String, Path, description = "The ask")),
    request_body = ReplyBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such pending ask", body = ErrorBody))
)]
pub async fn reply(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<ReplyBody>,
) -> Result<Json<bool>, ApiError> {
    let id: PermissionId = path_id("requestID", &id)?;
    answer(&state, &id, body.reply, body.message).await
}

/// Body of the deprecated `POST /session/:id/permissions/:permissionID`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct RespondBody {
    response: PermissionReply,
}

/// `POST /session/:id/permissions/:permissionID` (deprecated form of reply).
#[utoipa::path(
    post,
    path = "/session/{sessionID}/permissions/{permissionID}",
    operation_id = "permission.respond",
    summary = "Answer a permission ask (deprecated)",
    params(("sessionID" = String, Path, description = "The session"), ("permissionID" = String, Path, description = "The ask")),
    request_body = RespondBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such pending ask", body = ErrorBody))
)]
pub async fn respond(
    State(state): State<AppState>,
    Path((session, id)): Path<(String, String)>,
    Body(body): Body<RespondBody>,
) -> Result<Json<bool>, ApiError> {
    let session = session_id(&session)?;
    let id: PermissionId = path_id("permissionID", &id)?;
    let belongs = state
        .runtime
        .pending_permissions()
        .await
        .iter()
        .any(|p| p.id == id && p.session_id == session);
    if !belongs {
        return Err(not_pending(&id));
    }
    answer(&state, &id, body.response, None).await
}

async fn answer(
    state: &AppState,
    id: &PermissionId,
    reply: PermissionReply,
    message: Option<String>,
) -> Result<Json<bool>, ApiError> {
    if state.runtime.reply_permission(id, reply, message).await {
        Ok(Json(true))
    } else {
        Err(not_pending(id))
    }
}

fn not_pending(id: &PermissionId) -> ApiError {
    ApiError::not_found(format!(
        "permission request not found: {id} (it was answered already, or never asked)"
    ))
}
