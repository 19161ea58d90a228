//! Anthropic's error statuses and `error` events → [`ProviderError`].
//!
//! Anthropic's error body is `{"type": "error", "error": {"type": …, "message": …}}`; the same
//! object comes as an `error` event when a stream fails after it started.

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::provider::ProviderError;
use crate::provider::openai::errors::status_error;

/// Phrases Anthropic uses when a request does not fit the context window (lowercase).
const OVERFLOW_PHRASES: &[&str] = &[
    "prompt is too long",
    "exceed context limit",
    "exceeds the context",
    "context window",
    "context length",
    "too many tokens",
];

/// The error for an HTTP error response (`status` ≥ 400) with its headers and body.
pub(crate) fn from_status(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: String,
) -> ProviderError {
    let (kind, message) = parse(&body);
    let overflow = is_overflow(kind.as_deref(), message.as_deref(), &body);
    let message = |body: &str| message.unwrap_or_else(|| body.trim().to_string());
    status_error(provider, status, headers, body, message, overflow)
}

/// The error for an `error` event in the stream; its `error.type` stands for a status.
pub(crate) fn from_stream_error(provider: &str, event: &Value) -> ProviderError {
    let body = event.to_string();
    let error = event.get("error").unwrap_or(event);
    let kind = error.get("type").and_then(Value::as_str);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string);
    if is_overflow(kind, message.as_deref(), &body) {
        return ProviderError::ContextOverflow {
            message: message.unwrap_or(body),
        };
    }
    let status = match kind {
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        Some("invalid_request_error") => 400,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("timeout_error") => 504,
        Some("overloaded_error") => 529,
        _ => 500,
    };
    match status {
        401 | 403 => ProviderError::Auth {
            provider: provider.to_string(),
            message: message.unwrap_or(body),
        },
        status => ProviderError::Http {
            provider: provider.to_string(),
            status,
            body,
            retry_after: None,
        },
    }
}

/// `error.type` and `error.message` of an Anthropic error body.
fn parse(body: &str) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return (None, None);
    };
    let error = value.get("error").unwrap_or(&value);
    let field = |name: &str| error.get(name).and_then(Value::as_str).map(str::to_string);
    (field("type"), field("message"))
}

/// Whether an error says the request does not fit the context window: a request too large,
/// or an invalid request talking about the prompt's length.
fn is_overflow(kind: Option<&str>, message: Option<&str>, body: &str) -> bool {
    if kind == Some("request_too_large") {
        return true;
    }
    if kind.is_some_and(|k| k != "invalid_request_error") {
        return false;
    }
    let text = message.unwrap_or(body).to_ascii_lowercase();
    OVERFLOW_PHRASES.iter().any(|p| text.contains(p))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;

    fn body(kind: &str, message: &str) -> String {
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
    }

    #[test]
    fn statuses_are_classified() {
        let h = HeaderMap::new();
        let e = from_status(
            "a",
            401,
            &h,
            body("authentication_error", "invalid x-api-key"),
        );
        assert!(
            matches!(&e, ProviderError::Auth { message, .. } if message == "invalid x-api-key")
        );
        assert!(!e.is_retryable());

        let e = from_status(
            "a",
            400,
            &h,
            body(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
        );
        assert!(
            matches!(&e, ProviderError::ContextOverflow { message } if message.starts_with("prompt is too long"))
        );
        assert!(!e.is_retryable());

        let e = from_status(
            "a",
            400,
            &h,
            body(
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000",
            ),
        );
        assert!(matches!(e, ProviderError::ContextOverflow { .. }));

        let e = from_status(
            "a",
            413,
            &h,
            body("request_too_large", "Request exceeds the maximum size"),
        );
        assert!(matches!(e, ProviderError::ContextOverflow { .. }));

        let e = from_status(
            "a",
            400,
            &h,
            body("invalid_request_error", "messages: roles must alternate"),
        );
        assert!(matches!(e, ProviderError::Http { status: 400, .. }));
        assert!(!e.is_retryable());
    }

    #[test]
    fn overload_and_rate_limits_are_retryable_with_retry_after() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        let e = from_status("a", 429, &h, body("rate_limit_error", "slow down"));
        assert!(matches!(
            e,
            ProviderError::Http { status: 429, retry_after: Some(d), .. } if d == Duration::from_secs(3)
        ));
        assert!(e.is_retryable());
        let e = from_status(
            "a",
            529,
            &HeaderMap::new(),
            body("overloaded_error", "Overloaded"),
        );
        assert!(matches!(e, ProviderError::Http { status: 529, .. }));
        assert!(e.is_retryable());
        let e = from_status(
            "a",
            502,
            &HeaderMap::new(),
            "<html>bad gateway</html>".into(),
        );
        assert!(e.is_retryable());
    }

    #[test]
    fn stream_errors_are_classified() {
        let event = |kind: &str, message: &str| json!({"type": "error", "error": {"type": kind, "message": message}});
        let e = from_stream_error("a", &event("overloaded_error", "Overloaded"));
        assert!(matches!(e, ProviderError::Http { status: 529, .. }));
        assert!(e.is_retryable());
        let e = from_stream_error("a", &event("api_error", "Internal server error"));
        assert!(matches!(e, ProviderError::Http { status: 500, .. }));
        assert!(e.is_retryable());
        let e = from_stream_error("a", &event("invalid_request_error", "prompt is too long"));
        assert!(matches!(e, ProviderError::ContextOverflow { .. }));
        let e = from_stream_error("a", &event("authentication_error", "bad key"));
        assert!(matches!(e, ProviderError::Auth { .. }));
        let e = from_stream_error("a", &event("invalid_request_error", "bad"));
        assert!(matches!(e, ProviderError::Http { status: 400, .. }));
        assert!(!e.is_retryable());
    }
}
