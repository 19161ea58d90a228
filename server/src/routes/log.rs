//! `POST /log`: a client's log line, written to the server's log at the level it gives.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, Query};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::{DirectoryQuery, check_directory};

/// How serious a client's log line is.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Details for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that was handled.
    Warn,
    /// A failure.
    Error,
}

/// Body of `POST /log`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct LogBody {
    /// The client part that logs (`tui`, …).
    service: String,
    /// How serious it is.
    level: Level,
    /// The line.
    message: String,
    /// More fields.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    extra: Option<Map<String, Value>>,
}

/// `POST /log`: writes a client's line to the server log; answers true.
#[utoipa::path(
    post,
    path = "/log",
    operation_id = "app.log",
    summary = "Write a client's line to the server log",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    request_body = LogBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn write(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
    Body(body): Body<LogBody>,
) -> Result<Json<bool>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let service = body.service.as_str();
    let extra = body.extra.map(Value::Object).unwrap_or(Value::Null);
    let message = body.message.as_str();
    match body.level {
        Level::Debug => tracing::debug!(target: "client", service, %extra, "{message}"),
        Level::Info => tracing::info!(target: "client", service, %extra, "{message}"),
        Level::Warn => tracing::warn!(target: "client", service, %extra, "{message}"),
        Level::Error => tracing::error!(target: "client", service, %extra, "{message}"),
    }
    Ok(Json(true))
}
