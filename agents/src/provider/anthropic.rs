//! The adapter for Anthropic's Messages API.
//!
//! A call is `POST {base_url}/messages` with `stream: true`, the key in `x-api-key` and
//! `anthropic-version: 2023-06-01`, read as server-sent events and turned into
//! [`ModelEvent`](super::ModelEvent)s:
//!
//! - `text_delta` → `TextDelta`; `thinking_delta` → `ReasoningDelta`; `signature_delta` →
//!   `ReasoningSignature` (stored on the reasoning part and sent back as a signed `thinking`
//!   block, which extended thinking with tools requires). Redacted thinking is not kept.
//! - a `tool_use` block → `ToolCallStart` when it opens, its `input_json_delta` pieces gathered,
//!   and one complete `ToolCall` when it closes (no pieces → the block's own `input`, else `{}`).
//! - `message_start` / `message_delta` usage → `Usage`, just before `Finish` at `message_stop`:
//!   `input` is `input_tokens` (Anthropic already counts cache reads and writes apart, as
//!   OpenCode reports them), `cache_read_input_tokens` → `cache_read`,
//!   `cache_creation_input_tokens` → `cache_write`.
//! - `stop_reason`: `end_turn` / `stop_sequence` → stop, `tool_use` → tool-calls, `max_tokens`
//!   → length, `refusal` → content-filter.
//! - a stream that ends before `message_stop` (and without a stop reason) →
//!   [`ProviderError::StreamCut`]; an `error` event → the error its `error.type` stands for.
//!
//! Errors: 401/403 → [`ProviderError::Auth`]; `invalid_request_error` about the prompt being
//! too long, or `request_too_large` → [`ProviderError::ContextOverflow`]; 429, 529
//! (`overloaded_error`) and 5xx → `Http`, retryable, with `retry-after`; connect failures →
//! `Connection`. The adapter never retries.
//!
//! The request puts the system prompt in the top-level `system` blocks and marks the last one,
//! and the last blocks of the latest two messages, with `cache_control: {type: "ephemeral"}`
//! (OpenCode's caching). The model id sent is the one this instance was made for.

mod errors;
mod request;
pub(crate) mod stream;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};

use super::http::{Endpoint, Timeouts, Wire, describe, stream_call};
use super::{LanguageModel, ModelRequest, ModelStream, ProviderError};
use crate::config::ProviderConfig;
use crate::config::redact::{REDACTED, Redactor, url_credentials};
use crate::model::ModelRef;

/// Anthropic's own endpoint, the default `base_url`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The environment variable read for the key when the provider names none.
pub const DEFAULT_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// How long connecting to the endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach the Messages API.
#[derive(Clone, Default, PartialEq)]
pub struct AnthropicSettings {
    /// The API base URL, for example `https://api.anthropic.com/v1`.
    pub base_url: String,
    /// The key sent as `x-api-key`; none sends no such header (for proxies that add it).
    pub api_key: Option<String>,
    /// Extra headers sent with every request (`anthropic-beta`, or overrides).
    pub headers: IndexMap<String, String>,
}

impl std::fmt::Debug for AnthropicSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicSettings")
            .field("base_url", &url_credentials(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One configured Anthropic provider: an HTTP client shared by all its models.
pub struct AnthropicProvider {
    id: String,
    base_url: String,
    endpoint: String,
    headers: HeaderMap,
    client: reqwest::Client,
    timeouts: Timeouts,
    redactor: Redactor,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("id", &self.id)
            .field("base_url", &url_credentials(&self.base_url))
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// A provider with id `id` (used in errors and model refs) reaching `settings`.
    pub fn new(id: impl Into<String>, settings: AnthropicSettings) -> Result<Self, ProviderError> {
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
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            let mut value = HeaderValue::from_str(key).map_err(|_| {
                config_error("the API key has characters a header cannot hold".into())
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
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
        Ok(AnthropicProvider {
            redactor,
            endpoint: format!("{base_url}/messages"),
            id,
            base_url,
            headers,
            client,
            timeouts: Timeouts::default(),
        })
    }

    /// The provider `[provider.<id>]` of the configuration, reading the key from `env`.
    ///
    /// The key is `api_key`, else the variable named by `api_key_env`, else
    /// `ANTHROPIC_API_KEY`. A missing key is an error for the default endpoint and for a named
    /// variable; a custom `base_url` (a proxy) may go without one.
    pub fn from_config(
        id: &str,
        config: &ProviderConfig,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, ProviderError> {
        let lookup = |var: &str| {
            env.get(var)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let api_key = if let Some(key) = &config.api_key {
            Some(key.expose().to_string())
        } else {
            let var = config.api_key_env.as_deref().unwrap_or(DEFAULT_API_KEY_ENV);
            let key = lookup(var);
            if key.is_none() && (config.api_key_env.is_some() || config.base_url.is_none()) {
                return Err(ProviderError::Config {
                    provider: id.to_string(),
                    message: format!(
                        "the environment variable {var} is not set; set it to the API key or \
                         put `api_key` in [provider.{id}]"
                    ),
                });
            }
            key
        };
        Ok(AnthropicProvider::new(
            id,
            AnthropicSettings {
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

    /// Whether [`AnthropicProvider::from_config`] fails only because the key is not set.
    pub fn is_missing_key(config: &ProviderConfig, env: &BTreeMap<String, String>) -> bool {
        let unset = |var: &str| env.get(var).is_none_or(|v| v.trim().is_empty());
        config.api_key.is_none()
            && match &config.api_key_env {
                Some(var) => unset(var),
                None => config.base_url.is_none() && unset(DEFAULT_API_KEY_ENV),
            }
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

    /// Whether requests carry an `x-api-key` header.
    pub fn has_api_key(&self) -> bool {
        self.headers.contains_key("x-api-key")
    }
}

/// One model of an [`AnthropicProvider`].
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    provider: Arc<AnthropicProvider>,
    model: ModelRef,
}

impl AnthropicModel {
    /// The model `model_id` of `provider`.
    pub fn new(provider: Arc<AnthropicProvider>, model_id: impl Into<String>) -> Self {
        let model = ModelRef::new(provider.id.clone(), model_id);
        AnthropicModel { provider, model }
    }

    /// The request body this model sends for `request` (for logging and tests).
    pub fn request_body(&self, request: &ModelRequest) -> serde_json::Value {
        request::body(&self.model.model_id, request)
    }
}

#[async_trait::async_trait]
impl LanguageModel for AnthropicModel {
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

/// The messages wire format.
const WIRE: Wire = Wire {
    call: "messages",
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
    fn key_comes_from_the_default_variable() {
        let config = ProviderConfig::default();
        let p = AnthropicProvider::from_config(
            "anthropic",
            &config,
            &env(&[("ANTHROPIC_API_KEY", "sk-ant")]),
        )
        .unwrap();
        assert!(p.has_api_key());
        assert_eq!(p.base_url(), DEFAULT_BASE_URL);
        assert_eq!(p.endpoint, "https://api.anthropic.com/v1/messages");
        assert_eq!(p.headers["anthropic-version"], API_VERSION);
        let err = AnthropicProvider::from_config("anthropic", &config, &env(&[])).unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
        assert!(AnthropicProvider::is_missing_key(&config, &env(&[])));
    }

    #[test]
    fn named_variable_explicit_key_and_proxies() {
        let named = ProviderConfig {
            api_key_env: Some("CLAUDE_KEY".into()),
            ..ProviderConfig::default()
        };
        assert!(
            AnthropicProvider::from_config("c", &named, &env(&[("CLAUDE_KEY", "k")]))
                .unwrap()
                .has_api_key()
        );
        let err = AnthropicProvider::from_config("c", &named, &env(&[("ANTHROPIC_API_KEY", "k")]))
            .unwrap_err();
        assert!(err.to_string().contains("CLAUDE_KEY"), "{err}");
        let explicit = ProviderConfig {
            api_key: Some(Secret("sk-x".into())),
            ..ProviderConfig::default()
        };
        assert!(
            AnthropicProvider::from_config("c", &explicit, &env(&[]))
                .unwrap()
                .has_api_key()
        );
        let proxy = ProviderConfig {
            base_url: Some("http://localhost:8080/v1/".into()),
            ..ProviderConfig::default()
        };
        let p = AnthropicProvider::from_config("c", &proxy, &env(&[])).unwrap();
        assert!(!p.has_api_key());
        assert_eq!(p.endpoint, "http://localhost:8080/v1/messages");
        assert!(!AnthropicProvider::is_missing_key(&proxy, &env(&[])));
    }

    #[test]
    fn headers_can_be_added_and_bad_settings_fail() {
        let p = AnthropicProvider::new(
            "c",
            AnthropicSettings {
                base_url: "http://x".into(),
                api_key: None,
                headers: IndexMap::from_iter([(
                    "anthropic-beta".to_string(),
                    "prompt-caching-2024-07-31".to_string(),
                )]),
            },
        )
        .unwrap();
        assert_eq!(p.headers["anthropic-beta"], "prompt-caching-2024-07-31");
        assert!(matches!(
            AnthropicProvider::new(
                "c",
                AnthropicSettings {
                    base_url: "api.anthropic.com".into(),
                    ..AnthropicSettings::default()
                }
            ),
            Err(ProviderError::Config { .. })
        ));
        let s = AnthropicSettings {
            base_url: "http://x".into(),
            api_key: Some("sk-secret".into()),
            headers: IndexMap::new(),
        };
        assert!(!format!("{s:?}").contains("sk-secret"));
    }
}
