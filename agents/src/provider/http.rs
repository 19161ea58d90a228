//! What the HTTP adapters share: posting a JSON request and turning transport failures and
//! error statuses into typed errors.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::sse::{Body, watched};
use super::{ModelRequest, ModelStream, ProviderError};
use crate::config::ProviderConfig;
use crate::config::redact::Redactor;

/// How long a model call waits on its provider when the configuration says nothing.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a model call may wait on its provider before it fails with the retryable
/// [`ProviderError::Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From sending the request to the response headers (`[provider.X] timeout`).
    pub headers: Duration,
    /// Between two pieces of the response body (`[provider.X] chunk_timeout`).
    pub chunk: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            headers: DEFAULT_TIMEOUT,
            chunk: DEFAULT_TIMEOUT,
        }
    }
}

impl Timeouts {
    /// The waits `config` sets, the defaults for those it leaves out.
    pub fn of(config: &ProviderConfig) -> Self {
        Timeouts {
            headers: config.timeout.unwrap_or(DEFAULT_TIMEOUT),
            chunk: config.chunk_timeout.unwrap_or(DEFAULT_TIMEOUT),
        }
    }
}

/// How an adapter speaks its wire format: the name of its call (for logs), the body of a
/// request, what an error status means, and how the answer's body becomes model events.
pub(crate) struct Wire {
    pub call: &'static str,
    pub body: fn(&str, &ModelRequest) -> Value,
    pub on_status: fn(&str, u16, &HeaderMap, String) -> ProviderError,
    pub events: fn(String, Body) -> ModelStream,
}

impl Wire {
    /// The wire format named `call`, with its request `body`, the meaning of an error status
    /// (`on_status`) and its answer's `events`.
    pub const fn new(
        call: &'static str,
        body: fn(&str, &ModelRequest) -> Value,
        on_status: fn(&str, u16, &HeaderMap, String) -> ProviderError,
        events: fn(String, Body) -> ModelStream,
    ) -> Self {
        Wire {
            call,
            body,
            on_status,
            events,
        }
    }
}

/// One streamed model call of `model_id` to `endpoint` in `wire`'s format.
pub(crate) async fn stream_call(
    endpoint: Endpoint<'_>,
    wire: &Wire,
    model_id: &str,
    request: &ModelRequest,
) -> Result<ModelStream, ProviderError> {
    let body = (wire.body)(model_id, request);
    tracing::debug!(
        provider = %endpoint.provider,
        model = %model_id,
        agent = %request.agent,
        messages = request.messages.len(),
        tools = request.tools.len(),
        "{} request",
        wire.call
    );
    let provider = endpoint.provider.to_string();
    let chunk = endpoint.timeouts.chunk;
    let response = post_json(endpoint, &body, wire.on_status).await?;
    Ok((wire.events)(
        provider,
        Box::pin(watched(response.bytes_stream(), chunk)),
    ))
}

/// Where an adapter sends its requests.
pub(crate) struct Endpoint<'a> {
    /// The provider id, for errors.
    pub provider: &'a str,
    /// The HTTP client.
    pub client: &'a reqwest::Client,
    /// The request URL.
    pub url: &'a str,
    /// The headers every request carries (auth, version).
    pub headers: &'a HeaderMap,
    /// How long the call may wait on the provider.
    pub timeouts: Timeouts,
    /// Hides the provider's credentials in error messages (an endpoint may echo them).
    pub redactor: &'a Redactor,
}

/// Posts `body`; a connection failure is `Connection`, no response headers within the
/// endpoint's `timeouts.headers` is `Timeout`, a non-2xx answer is what `on_status` makes of
/// its status, headers and body.
pub(crate) async fn post_json(
    endpoint: Endpoint<'_>,
    body: &Value,
    on_status: impl FnOnce(&str, u16, &HeaderMap, String) -> ProviderError,
) -> Result<reqwest::Response, ProviderError> {
    let send = endpoint
        .client
        .post(endpoint.url)
        .headers(endpoint.headers.clone())
        .json(body)
        .send();
    let limit = endpoint.timeouts.headers;
    let response = tokio::time::timeout(limit, send)
        .await
        .map_err(|_| ProviderError::Timeout {
            provider: endpoint.provider.to_string(),
            message: format!(
                "no response within {} (the provider's `timeout`)",
                humantime::format_duration(limit)
            ),
        })?
        .map_err(|e| ProviderError::Connection {
            provider: endpoint.provider.to_string(),
            message: endpoint.redactor.redact(&describe(&e)).into_owned(),
        })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    // An error body that never ends is read no longer than a stream's silence may last.
    let text = tokio::time::timeout(endpoint.timeouts.chunk, response.text())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let text = endpoint.redactor.redact(&text).into_owned();
    tracing::debug!(provider = %endpoint.provider, status = status.as_u16(), "error status");
    Err(on_status(
        endpoint.provider,
        status.as_u16(),
        &headers,
        text,
    ))
}

/// A reqwest error with its causes, which hold the useful part ("connection refused"); URL
/// credentials never show.
pub(crate) fn describe(error: &reqwest::Error) -> String {
    if let Some(refused) = refused(error) {
        return crate::config::redact::url_credentials(&refused).into_owned();
    }
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    crate::config::redact::url_credentials(&message).into_owned()
}

/// `connection refused to URL` when nothing listens at the request's address.
fn refused(error: &reqwest::Error) -> Option<String> {
    if !error.is_connect() {
        return None;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return error
                .url()
                .map(|url| format!("connection refused to {url}"));
        }
        source = cause.source();
    }
    None
}
