//! Health, the event streams, agents, commands and configuration.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;
#[allow(unused_imports)]
use taskforce_actors::bus::Event;
#[allow(unused_imports)]
use taskforce_agents::agent::AgentInfo;
#[allow(unused_imports)]
use taskforce_agents::command::CommandInfo;
use taskforce_agents::config::keybinds;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::{ErrorBody, GlobalEvent, Object};
use super::super::sse::{Flavor, last_event_id, respond};
use super::{DirectoryQuery, check_directory};

/// `GET /global/health`.
#[utoipa::path(
    get,
    path = "/global/health",
    operation_id = "global.health",
    summary = "Health of the server",
    responses((status = 200, body = Health))
)]
pub async fn health() -> Json<Health> {
    Json(Health {
        healthy: true,
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// The answer of `GET /global/health`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always true while the server answers.
    pub healthy: bool,
    /// The taskforce version.
    pub version: String,
}

/// `GET /event`: this project's events as `{type, properties}`.
#[utoipa::path(
    get,
    path = "/event",
    operation_id = "event.subscribe",
    summary = "This project's events (SSE, `{type, properties}`; `id:` per frame, `Last-Event-ID` replays)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, content_type = "text/event-stream", body = Event))
)]
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
        state.stop.clone(),
    ))
}

/// `GET /global/event`: every event as `{directory, payload}`.
#[utoipa::path(
    get,
    path = "/global/event",
    operation_id = "global.event",
    summary = "Every event (SSE, `{directory, payload}`)",
    responses((status = 200, content_type = "text/event-stream", body = GlobalEvent))
)]
pub async fn global_events(State(state): State<AppState>, headers: HeaderMap) -> Response {
    respond(
        &state.events,
        last_event_id(&headers),
        Flavor::Global,
        state.heartbeat,
        state.stop.clone(),
    )
}

/// `GET /agent`: every agent, the default first.
#[utoipa::path(
    get,
    path = "/agent",
    operation_id = "app.agents",
    summary = "Every agent, the default first",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<AgentInfo>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
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
#[utoipa::path(
    get,
    path = "/command",
    operation_id = "command.list",
    summary = "Every slash command",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<CommandInfo>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn commands(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let all: Vec<_> = state.runtime.commands().list().collect();
    Ok(Json(to_value(&all)?))
}

/// `GET /config`: the configuration the runtime runs on (secrets redacted), with `keybinds`
/// holding every action's key (the defaults with `[keybinds]` laid over them).
#[utoipa::path(
    get,
    path = "/config",
    operation_id = "config.get",
    summary = "The configuration (secrets redacted)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Object), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn config(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let config = state.runtime.config();
    let mut shown = to_value(&config.redacted())?;
    if let Value::Object(fields) = &mut shown {
        let keybinds = keybinds::with_defaults(&config.keybinds);
        fields.insert("keybinds".into(), to_value(&keybinds)?);
    }
    Ok(Json(shown))
}

pub(crate) fn to_value<T: serde::Serialize + ?Sized>(value: &T) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::unknown(format!("cannot encode: {e}")))
}
