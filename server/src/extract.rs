//! Request extractors whose rejections name what is wrong: the body field, the path id, the
//! query parameter.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body; a bad one is a 400 naming the field (`parts[0].type: unknown variant …`).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let status = e.status();
            ApiError {
                status,
                name: rejection_name(status),
                message: format!("request body: {}", e.body_text()),
            }
        })?;
        parse_body(&bytes).map(Body)
    }
}

/// An optional JSON body: an empty body is `T::default()`.
pub struct OptionalBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError {
                status: e.status(),
                name: rejection_name(e.status()),
                message: format!("request body: {}", e.body_text()),
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalBody(T::default()));
        }
        parse_body(&bytes).map(OptionalBody)
    }
}

/// `PayloadTooLarge` for 413, else `BadRequest`.
fn rejection_name(status: axum::http::StatusCode) -> &'static str {
    if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        "PayloadTooLarge"
    } else {
        "BadRequest"
    }
}

pub(crate) fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ApiError::bad_request(format!("request body: {inner}"))
        } else {
            ApiError::bad_request(format!("request body: field `{path}`: {inner}"))
        }
    })
}

/// Query parameters; a bad one is a 400 naming it.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded_de(query);
        de.map(Query)
    }
}

fn serde_urlencoded_de<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    axum::extract::Query::<T>::try_from_uri(
        &format!("/?{query}")
            .parse()
            .map_err(|_| ApiError::bad_request("query: not a valid query string"))?,
    )
    .map(|q| q.0)
    .map_err(|e| ApiError::bad_request(format!("query: {}", e.body_text())))
}

/// Parses a path id (`ses_…`, `msg_…`, `per_…`), naming the parameter when it is malformed.
pub fn path_id<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, ApiError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e| ApiError::bad_request(format!("path parameter `{name}`: {e}")))
}
