//! `/session` and `/session/:id`: list, create, read, patch, delete, children, todos, fork,
//! abort, statuses, and our subtree view.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::Value;
use taskforce_actors::SessionPatch;
use taskforce_actors::store::SessionFilter;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::Session;
use taskforce_agents::permission::Rule;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, OptionalBody, Query, path_id};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::global::to_value;
use super::{DirectoryQuery, check_directory};
#[allow(unused_imports)]
use std::collections::HashMap;
#[allow(unused_imports)]
use taskforce_actors::SessionTree;
#[allow(unused_imports)]
use taskforce_actors::bus::SessionStatus;
#[allow(unused_imports)]
use taskforce_agents::model::Todo;

/// Query of `GET /session`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    directory: Option<String>,
    /// Only sessions without a parent.
    roots: Option<bool>,
    /// Only sessions updated at or after this time (epoch ms).
    start: Option<u64>,
    /// Only sessions whose title contains this, case-insensitively.
    search: Option<String>,
    /// At most this many.
    limit: Option<usize>,
}

/// `GET /session`: sessions, most recently updated first.
#[utoipa::path(
    get,
    path = "/session",
    operation_id = "session.list",
    summary = "Sessions, most recently updated first",
    params(ListQuery),
    responses((status = 200, body = Vec<Session>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<Session>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let filter = SessionFilter {
        roots: q.roots.unwrap_or(false),
        start: q.start,
        search: q.search.filter(|s| !s.is_empty()),
        limit: q.limit,
        project_id: None,
    };
    Ok(Json(state.runtime.sessions(&filter).await?))
}

/// Body of `POST /session`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct CreateBody {
    #[serde(rename = "parentID")]
    parent_id: Option<SessionId>,
    title: Option<String>,
    permission: Option<Vec<Rule>>,
}

/// `POST /session`: a new session (a child when `parentID` is given).
#[utoipa::path(
    post,
    path = "/session",
    operation_id = "session.create",
    summary = "Create a session",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    request_body = Option<CreateBody>,
    responses((status = 200, body = Session), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn create(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
    OptionalBody(body): OptionalBody<CreateBody>,
) -> Result<Json<Session>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let session = state
        .runtime
        .create_session_with(body.parent_id.as_ref(), body.title, body.permission)
        .await?;
    Ok(Json(session))
}

/// `GET /session/status`: the status of every session that is not idle.
#[utoipa::path(
    get,
    path = "/session/status",
    operation_id = "session.status",
    summary = "Status of every session that is not idle",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = HashMap<String, SessionStatus>))
)]
pub async fn status(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(to_value(&state.runtime.statuses())?))
}

pub(crate) fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    path_id("sessionID", raw)
}

/// `GET /session/:id`.
#[utoipa::path(
    get,
    path = "/session/{sessionID}",
    operation_id = "session.get",
    summary = "One session",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = Session), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Session>, ApiError> {
    Ok(Json(state.runtime.session(&session_id(&id)?).await?))
}

/// Body of `PATCH /session/:id`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct UpdateBody {
    title: Option<String>,
    time: Option<UpdateTime>,
}

/// The `time` of a session patch.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct UpdateTime {
    archived: Option<u64>,
}

/// `PATCH /session/:id`: a new title or archive time.
#[utoipa::path(
    patch,
    path = "/session/{sessionID}",
    operation_id = "session.update",
    summary = "Change a session's title or archive time",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = UpdateBody,
    responses((status = 200, body = Session), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<UpdateBody>,
) -> Result<Json<Session>, ApiError> {
    let patch = SessionPatch {
        title: body.title,
        archived: body.time.and_then(|t| t.archived),
    };
    Ok(Json(
        state
            .runtime
            .update_session(&session_id(&id)?, patch)
            .await?,
    ))
}

/// `DELETE /session/:id`: the session and its subtree.
#[utoipa::path(
    delete,
    path = "/session/{sessionID}",
    operation_id = "session.delete",
    summary = "Delete a session and its subtree",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<bool>, ApiError> {
    state.runtime.delete_session(&session_id(&id)?).await?;
    Ok(Json(true))
}

/// `GET /session/:id/children`.
#[utoipa::path(
    get,
    path = "/session/{sessionID}/children",
    operation_id = "session.children",
    summary = "The direct children of a session",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = Vec<Session>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn children(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<Session>>, ApiError> {
    Ok(Json(state.runtime.children(&session_id(&id)?).await?))
}

/// `GET /session/:id/todo`.
#[utoipa::path(
    get,
    path = "/session/{sessionID}/todo",
    operation_id = "session.todo",
    summary = "The session's todo list",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = Vec<Todo>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn todo(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(to_value(
        &state.runtime.todos(&session_id(&id)?).await?,
    )?))
}

/// `GET /session/:id/tree` (ours): the subtree with status, agent and usage per node.
#[utoipa::path(
    get,
    path = "/session/{sessionID}/tree",
    operation_id = "session.tree",
    summary = "The subtree with status, agent and usage per node (taskforce)",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = SessionTree), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn tree(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(to_value(
        &state.runtime.tree(&session_id(&id)?).await?,
    )?))
}

/// Body of `POST /session/:id/fork`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct ForkBody {
    #[serde(rename = "messageID")]
    message_id: Option<MessageId>,
}

/// `POST /session/:id/fork`: a copy of the messages before `messageID`.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/fork",
    operation_id = "session.fork",
    summary = "Copy the messages before `messageID` into a new session",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = Option<ForkBody>,
    responses((status = 200, body = Session), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OptionalBody(body): OptionalBody<ForkBody>,
) -> Result<Json<Session>, ApiError> {
    Ok(Json(
        state
            .runtime
            .fork_session(&session_id(&id)?, body.message_id.as_ref())
            .await?,
    ))
}

/// `POST /session/:id/abort`: cancels the session's loop and its descendants'.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/abort",
    operation_id = "session.abort",
    summary = "Cancel the session's loop and its descendants'",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn abort(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<bool>, ApiError> {
    state.runtime.cancel(&session_id(&id)?).await?;
    Ok(Json(true))
}

/// Body of `POST /session/:id/summarize`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SummarizeBody {
    /// The provider of the model that summarizes.
    #[serde(rename = "providerID")]
    provider_id: String,
    /// The model that summarizes.
    #[serde(rename = "modelID")]
    model_id: String,
    /// Accepted for OpenCode's clients; a summary asked over HTTP is never automatic.
    #[serde(default)]
    #[allow(dead_code)]
    auto: bool,
}

/// `POST /session/:id/summarize`: summarizes the conversation; answers once done.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/summarize",
    operation_id = "session.summarize",
    summary = "Summarize the session's conversation (compaction)",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = SummarizeBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn summarize(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<SummarizeBody>,
) -> Result<Json<bool>, ApiError> {
    let model = taskforce_agents::model::ModelRef {
        provider_id: body.provider_id,
        model_id: body.model_id,
    };
    let id = session_id(&id)?;
    let summarized = state.runtime.summarize(&id, Some(model)).await;
    super::message::events_first(&state).await;
    let summary = summarized?;
    if let Some(error) = summary.info.as_assistant().and_then(|a| a.error.as_ref()) {
        return Err(ApiError::unknown(format!(
            "the summary failed: {}",
            error.message().unwrap_or(error.name())
        )));
    }
    Ok(Json(true))
}
