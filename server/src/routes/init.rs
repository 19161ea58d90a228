//! `POST /session/:id/init`: OpenCode's "analyze the project and write AGENTS.md", run as the
//! built-in `init` command in the session; answers true once the agent has finished.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use taskforce_agents::command::INIT;
use taskforce_agents::model::ModelRef;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{OptionalBody, Query};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::session::session_id;
use super::{DirectoryQuery, check_directory};

/// Body of `POST /session/:id/init`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct InitBody {
    /// The model to run on (with `providerID`); the session's default when left out.
    #[serde(rename = "modelID")]
    model_id: Option<String>,
    /// The model's provider.
    #[serde(rename = "providerID")]
    provider_id: Option<String>,
    /// OpenCode's id for the new message; taskforce makes its own ids and ignores it.
    #[serde(rename = "messageID")]
    #[allow(dead_code)]
    message_id: Option<String>,
}

/// `POST /session/:id/init`: runs the `init` command; answers true when it has finished.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/init",
    operation_id = "session.init",
    summary = "Analyze the project and write AGENTS.md (the `init` command)",
    params(("sessionID" = String, Path, description = "The session"), ("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    request_body = Option<InitBody>,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn init(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
    OptionalBody(body): OptionalBody<InitBody>,
) -> Result<Json<bool>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let id = session_id(&id)?;
    let model = match (body.provider_id, body.model_id) {
        (Some(provider_id), Some(model_id)) => Some(ModelRef {
            provider_id,
            model_id,
        }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(ApiError::bad_request(
                "request body: field `modelID`: required with `providerID`",
            ));
        }
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "request body: field `providerID`: required with `modelID`",
            ));
        }
    };
    let ran = state.runtime.command(&id, INIT, "", None, model).await;
    super::message::events_first(&state).await;
    ran?;
    Ok(Json(true))
}
