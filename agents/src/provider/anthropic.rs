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

use super::ProviderError;
use super::adapter::{HttpProvider, KeyHeader, Shape, env_key};
use super::http::Wire;
pub use super::{Anthropic, AnthropicModel, AnthropicProvider, AnthropicSettings};
use crate::config::ProviderConfig;

/// Anthropic's own endpoint, the default `base_url`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The environment variable read for the key when the provider names none.
pub const DEFAULT_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// A Messages call: the key in `x-api-key`, the API version, the messages wire format.
static SHAPE: Shape = Shape {
    key: KeyHeader::Named("x-api-key"),
    fixed_headers: &[("anthropic-version", API_VERSION)],
    default_base_url: DEFAULT_BASE_URL,
    path: "/messages",
    wire: Wire::new(
        "messages",
        request::body,
        errors::from_status,
        stream::events,
    ),
};

impl HttpProvider<Anthropic> {
    /// A provider with id `id` (used in errors and model refs) reaching `settings`.
    pub fn new(id: impl Into<String>, settings: AnthropicSettings) -> Result<Self, ProviderError> {
        Self::with_shape(id, settings, &SHAPE)
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
        let api_key = if let Some(key) = &config.api_key {
            Some(key.expose().to_string())
        } else {
            let var = config.api_key_env.as_deref().unwrap_or(DEFAULT_API_KEY_ENV);
            let key = env_key(env, var);
            if key.is_none() && (config.api_key_env.is_some() || config.base_url.is_none()) {
                return Err(ProviderError::MissingKey {
                    provider: id.to_string(),
                    var: var.to_string(),
                });
            }
            key
        };
        Self::configured(id, config, api_key, &SHAPE)
    }
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

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
        assert!(matches!(err, ProviderError::MissingKey { .. }), "{err}");
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
