//! `/session/:id/revert`, `/unrevert` and `/diff`: undoing and redoing a session's turns, and
//! the files its turns changed.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use taskforce_agents::id::{MessageId, PartId};
use taskforce_agents::model::{FileDiff, Session};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, Query};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::session::session_id;

/// Body of `POST /session/:id/revert`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct RevertBody {
    /// The first message undone.
    #[serde(rename = "messageID")]
    message_id: MessageId,
    /// The first part undone, when the revert is inside the message.
    #[serde(rename = "partID", default)]
    part_id: Option<PartId>,
}

/// Query of `GET /session/:id/diff`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffQuery {
    /// Only the turn this user message starts.
    #[serde(rename = "messageID")]
    message_id: Option<MessageId>,
    /// The project directory (accepted for OpenCode's clients).
    #[allow(dead_code)]
    directory: Option<String>,
}

/// `POST /session/:id/revert`: hides the messages from `messageID` on and puts back the files
/// their turns changed.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/revert",
    operation_id = "session.revert",
    summary = "Undo the turns from a message on: hide them and restore the files they changed",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = RevertBody,
    responses((status = 200, body = Session), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session or message", body = ErrorBody), (status = 500, description = "The session is busy", body = ErrorBody))
)]
pub async fn revert(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<RevertBody>,
) -> Result<Json<Session>, ApiError> {
    let id = session_id(&id)?;
    let session = state
        .runtime
        .revert(&id, &body.message_id, body.part_id.as_ref())
        .await?;
    Ok(Json(session))
}

/// `POST /session/:id/unrevert`: brings back what the last revert undid.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/unrevert",
    operation_id = "session.unrevert",
    summary = "Redo what the last revert undid",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = Session), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody), (status = 500, description = "The session is busy", body = ErrorBody))
)]
pub async fn unrevert(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Session>, ApiError> {
    Ok(Json(state.runtime.unrevert(&session_id(&id)?).await?))
}

/// `GET /session/:id/diff`: the files the session's turns changed (or one turn's).
#[utoipa::path(
    get,
    path = "/session/{sessionID}/diff",
    operation_id = "session.diff",
    summary = "The files the session's turns changed, as they are now",
    params(("sessionID" = String, Path, description = "The session"), DiffQuery),
    responses((status = 200, body = Vec<FileDiff>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session or message", body = ErrorBody))
)]
pub async fn diff(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<DiffQuery>,
) -> Result<Json<Vec<FileDiff>>, ApiError> {
    let id = session_id(&id)?;
    Ok(Json(
        state.runtime.diff(&id, query.message_id.as_ref()).await?,
    ))
}
