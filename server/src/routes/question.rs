//! Questions agents ask the user: the pending list, answers and dismissals.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use taskforce_actors::question::QuestionRequest;
use taskforce_agents::id::QuestionId;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, path_id};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;

/// `GET /question`: every pending question, oldest first.
#[utoipa::path(
    get,
    path = "/question",
    operation_id = "question.list",
    summary = "Every question waiting for the user",
    responses((status = 200, body = Vec<QuestionRequest>))
)]
pub async fn list(State(state): State<AppState>) -> Json<Vec<QuestionRequest>> {
    Json(state.runtime.pending_questions().await)
}

/// Body of `POST /question/:id/reply`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct AnswerBody {
    /// The labels picked (or typed), one list per question, in order.
    answers: Vec<Vec<String>>,
}

/// `POST /question/:id/reply`: answers a question; the asking run goes on.
#[utoipa::path(
    post,
    path = "/question/{requestID}/reply",
    operation_id = "question.reply",
    summary = "Answer a question",
    params(("requestID" = String, Path, description = "The question")),
    request_body = AnswerBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such pending question", body = ErrorBody))
)]
pub async fn reply(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<AnswerBody>,
) -> Result<Json<bool>, ApiError> {
    let id: QuestionId = path_id("requestID", &id)?;
    match state.runtime.reply_question(&id, body.answers).await {
        Ok(true) => Ok(Json(true)),
        Ok(false) => Err(not_pending(&id)),
        Err(e) => Err(ApiError::bad_request(e.to_string())),
    }
}

/// `POST /question/:id/reject`: dismisses a question; the asking run stops.
#[utoipa::path(
    post,
    path = "/question/{requestID}/reject",
    operation_id = "question.reject",
    summary = "Dismiss a question",
    params(("requestID" = String, Path, description = "The question")),
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such pending question", body = ErrorBody))
)]
pub async fn reject(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<bool>, ApiError> {
    let id: QuestionId = path_id("requestID", &id)?;
    if state.runtime.reject_question(&id).await {
        Ok(Json(true))
    } else {
        Err(not_pending(&id))
    }
}

fn not_pending(id: &QuestionId) -> ApiError {
    ApiError::not_found(format!(
        "question not found: {id} (it was answered or dismissed already, or never asked)"
    ))
}
