//! Errors as OpenCode's server sends them: `{name, data: {message}}` with 400, 404 or 500.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use taskforce_actors::RuntimeError;

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// OpenCode's error name (`NotFoundError`, `BadRequest`, `UnknownError`, …).
    pub name: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

impl ApiError {
    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            name: "BadRequest",
            message: message.into(),
        }
    }

    /// 404: what the request names does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            name: "NotFoundError",
            message: message.into(),
        }
    }

    /// 500: anything else.
    pub fn unknown(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            name: "UnknownError",
            message: message.into(),
        }
    }
}

/// A known path asked with a method it does not take: 405 in the usual error shape.
pub(crate) async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        name: "MethodNotAllowed",
        message: format!("{} does not take {method}", uri.path()),
    }
}

impl From<RuntimeError> for ApiError {
    fn from(error: RuntimeError) -> Self {
        let message = error.to_string();
        match error {
            RuntimeError::SessionNotFound(_) | RuntimeError::MessageNotFound(_) => {
                ApiError::not_found(message)
            }
            RuntimeError::InvalidId(_)
            | RuntimeError::InvalidInput(_)
            | RuntimeError::Agent(_)
            | RuntimeError::UnknownCommand(_) => ApiError::bad_request(message),
            RuntimeError::Provider(_) => ApiError {
                status: StatusCode::BAD_REQUEST,
                name: "ProviderModelNotFoundError",
                message,
            },
            // OpenCode answers a busy session with a plain 500 `UnknownError`.
            RuntimeError::Busy(_)
            | RuntimeError::Store(_)
            | RuntimeError::Cancelled
            | RuntimeError::Crashed(_)
            | RuntimeError::Stopped
            | RuntimeError::Cluster(_)
            | RuntimeError::Elsewhere(_)
            | RuntimeError::Lock(_) => ApiError::unknown(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"name": self.name, "data": {"message": self.message}});
        (self.status, Json(body)).into_response()
    }
}
