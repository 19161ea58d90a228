//! Health, the event streams, agents, commands and configuration.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
use super::super::sse::{Flavor, last_event_id, respond};
use super::{DirectoryQuery, check_directory};

/// `GET /global/health`.
pub async fn health() -> Json<Value> {
    Json(json!({"healthy": true, "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /event`: this project's events as `{type, properties}`.
pub async fn events(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(respond(
        &state.events,
        last_event_id(&headers),
        Flavor::Local,
        state.heartbeat,
    ))
}

/// `GET /global/event`: every event as `{directory, payload}`.
pub async fn global_events(State(state): State<AppState>, headers: HeaderMap) -> Response {
    respond(
        &state.events,
        last_event_id(&headers),
        Flavor::Global,
        state.heartbeat,
    )
}

/// `GET /agent`: every agent, the default first.
pub async fn agents(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let registry = state.runtime.registry();
    let default = registry.default_agent();
    let agents: Vec<_> = std::iter::once(default)
        .chain(registry.list().filter(|a| a.name != default.name))
        .collect();
    Ok(Json(to_value(&agents)?))
}

/// `GET /command`: every slash command.
pub async fn commands(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let all: Vec<_> = state.runtime.commands().list().collect();
    Ok(Json(to_value(&all)?))
}

/// `GET /config`: the configuration the runtime runs on (secrets redacted).
pub async fn config(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(to_value(state.runtime.config())?))
}

pub(crate) fn to_value<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::unknown(format!("cannot encode: {e}")))
}
