//! `/session/:id/message/:messageID/part/:partID`: a client removes or rewrites a stored part
//! (while the session does not run).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::Value;
use taskforce_agents::id::{MessageId, PartId};
use taskforce_agents::model::Part;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, path_id};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::session::session_id;

/// `DELETE /session/:id/message/:messageID/part/:partID`: removes the part.
#[utoipa::path(
    delete,
    path = "/session/{sessionID}/message/{messageID}/part/{partID}",
    operation_id = "part.delete",
    summary = "Remove a part of a stored message",
    params(("sessionID" = String, Path, description = "The session"), ("messageID" = String, Path, description = "The message"), ("partID" = String, Path, description = "The part")),
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session or message", body = ErrorBody), (status = 500, description = "The session is busy", body = ErrorBody))
)]
pub async fn delete(
    State(state): State<AppState>,
    Path((session, message, part)): Path<(String, String, String)>,
) -> Result<Json<bool>, ApiError> {
    let session = session_id(&session)?;
    let message: MessageId = path_id("messageID", &message)?;
    let part: PartId = path_id("partID", &part)?;
    state.runtime.remove_part(&session, &message, &part).await?;
    Ok(Json(true))
}

/// `PATCH /session/:id/message/:messageID/part/:partID`: replaces the part with the body (a
/// part with the same ids).
#[utoipa::path(
    patch,
    path = "/session/{sessionID}/message/{messageID}/part/{partID}",
    operation_id = "part.update",
    summary = "Rewrite a part of a stored message",
    params(("sessionID" = String, Path, description = "The session"), ("messageID" = String, Path, description = "The message"), ("partID" = String, Path, description = "The part")),
    request_body = Part,
    responses((status = 200, body = Part), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session or message", body = ErrorBody), (status = 500, description = "The session is busy", body = ErrorBody))
)]
pub async fn update(
    State(state): State<AppState>,
    Path((session, message, part)): Path<(String, String, String)>,
    Body(body): Body<Value>,
) -> Result<Json<Part>, ApiError> {
    let session = session_id(&session)?;
    let message: MessageId = path_id("messageID", &message)?;
    let id: PartId = path_id("partID", &part)?;
    let part: Part = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a part: {e}")))?;
    if part.id != id || part.message_id != message {
        return Err(ApiError::bad_request(format!(
            "the body is part {} of message {}, not part {id} of message {message}",
            part.id, part.message_id
        )));
    }
    Ok(Json(state.runtime.update_part(&session, part).await?))
}
