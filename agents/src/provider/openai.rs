//! The adapter for OpenAI-compatible chat-completions endpoints (OpenAI, Ollama, vLLM,
//! llama.cpp, OpenRouter, LM Studio, …).
//!
//! A call is `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage`, read as server-sent events and turned into
//! [`ModelEvent`](super::ModelEvent)s:
//!
//! - `choices[0].delta.content` → `TextDelta`; `delta.reasoning_content` or `delta.reasoning`
//!   → `ReasoningDelta`.
//! - `delta.tool_calls[]` pieces (by `index`) → `ToolCallStart` once a call's id and name are
//!   known, then one complete `ToolCall` per call when the choice finishes. Empty arguments
//!   become `{}`; a missing id gets a generated `call_…` id.
//! - the `usage` chunk → `Usage` (cached prompt tokens are reported as `cache_read`, not
//!   `input`), always just before `Finish`, which is sent when the stream ends (`[DONE]` or end
//!   of body). A `stop` finish after tool calls is reported as `tool-calls`.
//! - a stream that ends without a `finish_reason` → [`ProviderError::StreamCut`]; a broken body
//!   after the response started → `StreamCut` too; a chunk that is not JSON → `Decode`; an
//!   `{"error": …}` chunk → `Http` (or `ContextOverflow` / `Auth`) like an error status.
//!
//! Errors before the stream: 401/403 → [`ProviderError::Auth`]; 400/413 whose body talks about
//! the context length → [`ProviderError::ContextOverflow`]; other statuses → `Http` with the body
//! and `retry-after-ms` / `retry-after` (seconds or HTTP date); connect failures → `Connection`.
//! The adapter never retries; dropping the returned stream drops the HTTP connection.
//!
//! The model id sent is the one this instance was made for (`ModelRequest::model` is not read).

pub(super) mod errors;
pub(super) mod request;
pub(crate) mod stream;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use super::http::{Endpoint, Timeouts, Wire, describe, stream_call};
use super::{LanguageModel, ModelRequest, ModelStream, ProviderError};
use crate::config::ProviderConfig;
use crate::config::redact::{REDACTED, Redactor, url_credentials};
use crate::model::ModelRef;

/// OpenAI's own endpoint, the default `base_url`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable read for the key of a provider that names none and uses
/// [`DEFAULT_BASE_URL`].
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// How long connecting to the endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach an OpenAI-compatible endpoint.
#[derive(Clone, Default, PartialEq)]
pub struct OpenAiSettings {
    /// The API base URL, for example `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// The key sent as `Authorization: Bearer <key>`; none sends no such header.
    pub api_key: Option<String>,
    /// Extra headers sent with every request (they may override `Authorization`).
    pub headers: IndexMap<String, String>,
}

impl std::fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &url_credentials(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One configured OpenAI-compatible provider: an HTTP client shared by all its models.
pub struct OpenAiProvider {
    id: String,
    base_url: String,
    endpoint: String,
    headers: HeaderMap,
    client: reqwest::Client,
    timeouts: Timeouts,
    redactor: Redactor,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("id", &self.id)
            .field("base_url", &url_credentials(&self.base_url))
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// A provider with id `id` (used in errors and model refs) reaching `settings`.
    pub fn new(id: impl Into<String>, settings: OpenAiSettings) -> Result<Self, ProviderError> {
        let id = id.into();
        let config_error = |message: String| ProviderError::Config {
            provider: id.clone(),
            message,
        };
        let base_url = settings.base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(config_error(format!(
                "base_url `{}` is not an http(s) URL",
                url_credentials(&settings.base_url)
            )));
        }
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(key) = settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                config_error("the API key has characters a header cannot hold".into())
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &settings.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| config_error(format!("`{name}` is not a valid header name")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| config_error(format!("the value of header `{name}` is not valid")))?;
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| config_error(format!("cannot build the HTTP client: {}", describe(&e))))?;
        let redactor = Redactor::for_provider(
            settings.api_key.as_deref(),
            settings.headers.values(),
            &settings.base_url,
        );
        Ok(OpenAiProvider {
            redactor,
            endpoint: format!("{base_url}/chat/completions"),
            id,
            base_url,
            headers,
            client,
            timeouts: Timeouts::default(),
        })
    }

    /// The provider `[provider.<id>]` of the configuration, reading the key from `env`.
    ///
    /// The key is `api_key`, else the variable named by `api_key_env` (an error when it is not
    /// set), else — only for the default OpenAI endpoint — `OPENAI_API_KEY` when set. Local
    /// endpoints usually need no key.
    pub fn from_config(
        id: &str,
        config: &ProviderConfig,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, ProviderError> {
        let api_key = if let Some(key) = &config.api_key {
            Some(key.expose().to_string())
        } else if let Some(var) = &config.api_key_env {
            match env.get(var).filter(|v| !v.trim().is_empty()) {
                Some(key) => Some(key.trim().to_string()),
                None => {
                    return Err(ProviderError::Config {
                        provider: id.to_string(),
                        message: format!(
                            "the environment variable {var} (api_key_env) is not set; \
                             set it to the API key or put `api_key` in [provider.{id}]"
                        ),
                    });
                }
            }
        } else if config.base_url.is_none() {
            env.get(DEFAULT_API_KEY_ENV)
                .filter(|v| !v.trim().is_empty())
                .map(|v| v.trim().to_string())
        } else {
            None
        };
        Ok(OpenAiProvider::new(
            id,
            OpenAiSettings {
                base_url: config
                    .base_url
                    .clone()
                    .unwrap_or_else(|| DEFAULT_BASE_URL.to_string()),
                api_key,
                headers: config.headers.clone(),
            },
        )?
        .with_timeouts(Timeouts::of(config)))
    }

    /// The same provider waiting on its endpoint at most as long as `timeouts` says.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The provider id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether requests carry an `Authorization` header.
    pub fn has_api_key(&self) -> bool {
        self.headers.contains_key(AUTHORIZATION)
    }
}

/// One model of an [`OpenAiProvider`].
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    provider: Arc<OpenAiProvider>,
    model: ModelRef,
}

impl OpenAiModel {
    /// The model `model_id` of `provider`.
    pub fn new(provider: Arc<OpenAiProvider>, model_id: impl Into<String>) -> Self {
        let model = ModelRef::new(provider.id.clone(), model_id);
        OpenAiModel { provider, model }
    }

    /// The request body this model sends for `request` (for logging and tests).
    pub fn request_body(&self, request: &ModelRequest) -> serde_json::Value {
        request::body(&self.model.model_id, request)
    }
}

#[async_trait::async_trait]
impl LanguageModel for OpenAiModel {
    fn model(&self) -> &ModelRef {
        &self.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError> {
        let provider = &self.provider;
        let endpoint = Endpoint {
            provider: &provider.id,
            client: &provider.client,
            url: &provider.endpoint,
            headers: &provider.headers,
            timeouts: provider.timeouts,
            redactor: &provider.redactor,
        };
        stream_call(endpoint, &WIRE, &self.model.model_id, request).await
    }
}

/// The chat completions wire format.
const WIRE: Wire = Wire {
    call: "chat completions",
    body: request::body,
    on_status: errors::from_status,
    events: stream::events,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn key_comes_from_api_key_env() {
        let config = ProviderConfig {
            api_key_env: Some("MY_KEY".into()),
            ..ProviderConfig::default()
        };
        let p = OpenAiProvider::from_config("x", &config, &env(&[("MY_KEY", "sk-1")])).unwrap();
        assert!(p.has_api_key());
        assert_eq!(p.base_url(), DEFAULT_BASE_URL);
        let err = OpenAiProvider::from_config("x", &config, &env(&[])).unwrap_err();
        assert!(err.to_string().contains("MY_KEY"), "{err}");
    }

    #[test]
    fn explicit_key_and_default_env() {
        let config = ProviderConfig {
            api_key: Some(Secret("sk-2".into())),
            ..ProviderConfig::default()
        };
        assert!(
            OpenAiProvider::from_config("x", &config, &env(&[]))
                .unwrap()
                .has_api_key()
        );
        let default = ProviderConfig::default();
        assert!(
            OpenAiProvider::from_config("x", &default, &env(&[("OPENAI_API_KEY", "k")]))
                .unwrap()
                .has_api_key()
        );
        let local = ProviderConfig {
            base_url: Some("http://localhost:11434/v1/".into()),
            ..ProviderConfig::default()
        };
        let p = OpenAiProvider::from_config("ollama", &local, &env(&[("OPENAI_API_KEY", "k")]))
            .unwrap();
        assert!(!p.has_api_key());
        assert_eq!(p.base_url(), "http://localhost:11434/v1");
    }

    #[test]
    fn bad_settings_are_config_errors() {
        let bad_url = OpenAiSettings {
            base_url: "localhost:1234".into(),
            ..OpenAiSettings::default()
        };
        assert!(matches!(
            OpenAiProvider::new("x", bad_url),
            Err(ProviderError::Config { .. })
        ));
        let bad_header = OpenAiSettings {
            base_url: "http://x".into(),
            headers: IndexMap::from_iter([("bad header".to_string(), "v".to_string())]),
            ..OpenAiSettings::default()
        };
        assert!(matches!(
            OpenAiProvider::new("x", bad_header),
            Err(ProviderError::Config { .. })
        ));
    }

    #[test]
    fn settings_debug_hides_the_key() {
        let s = OpenAiSettings {
            base_url: "http://x".into(),
            api_key: Some("sk-secret".into()),
            headers: IndexMap::new(),
        };
        assert!(!format!("{s:?}").contains("sk-secret"));
    }
}
