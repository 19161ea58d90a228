//! `POST` and `DELETE /session/:id/share`: OpenCode publishes sessions on its share service;
//! taskforce keeps sessions on this machine, so both answer a 400 that says so.

use axum::extract::Path;

use super::super::error::ApiError;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::session::session_id;

fn unsupported(raw: &str) -> ApiError {
    match session_id(raw) {
        Ok(id) => ApiError::bad_request(format!(
            "session {id}: sharing is not supported by taskforce (sessions stay on this machine)"
        )),
        Err(e) => e,
    }
}

/// `POST /session/:id/share`: not supported (400).
#[utoipa::path(
    post,
    path = "/session/{sessionID}/share",
    operation_id = "session.share",
    summary = "Share a session: not supported by taskforce (400)",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 400, description = "Sharing is not supported", body = ErrorBody))
)]
pub async fn share(Path(id): Path<String>) -> ApiError {
    unsupported(&id)
}

/// `DELETE /session/:id/share`: not supported (400).
#[utoipa::path(
    delete,
    path = "/session/{sessionID}/share",
    operation_id = "session.unshare",
    summary = "Unshare a session: not supported by taskforce (400)",
    params(("sessionID" = String, Path, description = "The session")),
    responses((status = 400, description = "Sharing is not supported", body = ErrorBody))
)]
pub async fn unshare(Path(id): Path<String>) -> ApiError {
    unsupported(&id)
}
