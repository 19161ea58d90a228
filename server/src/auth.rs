//! Basic auth (user `taskforce`, password from `TASKFORCE_SERVER_PASSWORD`) and CORS for
//! localhost origins only.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

use super::error::ApiError;

/// The user name basic auth expects.
pub const USER: &str = "taskforce";

/// The expected basic-auth credentials (`base64(taskforce:password)`), when a password is set.
#[derive(Clone)]
pub struct Password(Option<Arc<str>>);

impl Password {
    /// The credentials for `password`.
    pub fn new(password: Option<String>) -> Self {
        Password(password.filter(|p| !p.is_empty()).map(|p| {
            Arc::from(base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{p}")))
        }))
    }
}

/// The credentials of a `Basic` `Authorization` value (the scheme is case-insensitive).
fn basic_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("basic")
        .then(|| credentials.trim())
}

/// Rejects requests without the right credentials (preflight `OPTIONS` passes).
pub async fn basic(State(expected): State<Password>, request: Request, next: Next) -> Response {
    let Some(expected) = expected.0 else {
        return next.run(request).await;
    };
    if request.method() == Method::OPTIONS {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(basic_credentials);
    if given.is_some_and(|g| constant_time_eq(g.as_bytes(), expected.as_bytes())) {
        return next.run(request).await;
    }
    let mut response = ApiError {
        status: StatusCode::UNAUTHORIZED,
        name: "Unauthorized",
        message: format!("this server needs basic auth as user `{USER}`"),
    }
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"taskforce\""),
    );
    response
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// CORS for pages served from this machine: `http://localhost[:port]`, `http://127.0.0.1[:port]`
/// and `http://[::1][:port]`.
pub fn cors() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(|origin, _| {
            origin.to_str().is_ok_and(is_local_origin)
        }))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers(Any)
}

/// Whether `origin` is a page on this machine.
pub fn is_local_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host_port = |host: &str| {
        rest.strip_prefix(host).is_some_and(|tail| {
            tail.is_empty()
                || tail
                    .strip_prefix(':')
                    .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    host_port("localhost") || host_port("127.0.0.1") || host_port("[::1]")
}

#[cfg(test)]
mod tests {
    use super::{basic_credentials, is_local_origin};

    #[test]
    fn the_basic_scheme_is_case_insensitive() {
        for value in ["Basic abc=", "basic abc=", "BASIC  abc= ", " Basic abc="] {
            assert_eq!(basic_credentials(value), Some("abc="), "{value:?}");
        }
        for value in ["Bearer abc=", "Basicabc=", "abc="] {
            assert_eq!(basic_credentials(value), None, "{value:?}");
        }
    }

    #[test]
    fn only_local_origins_pass() {
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "http://127.0.0.1:4096",
            "https://localhost:8443",
            "http://[::1]:80",
        ] {
            assert!(is_local_origin(ok), "{ok}");
        }
        for bad in [
            "http://localhost.evil.com",
            "http://127.0.0.1.evil.com:80",
            "http://evil.com",
            "http://localhost:",
            "http://localhost:80abc",
            "null",
            "file://",
        ] {
            assert!(!is_local_origin(bad), "{bad}");
        }
    }
}
