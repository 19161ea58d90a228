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

use super::ProviderError;
use super::adapter::{HttpProvider, KeyHeader, Shape, env_key};
use super::http::Wire;
pub use super::{OpenAi, OpenAiModel, OpenAiProvider, OpenAiSettings};
use crate::config::ProviderConfig;

/// OpenAI's own endpoint, the default `base_url`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable read for the key of a provider that names none and uses
/// [`DEFAULT_BASE_URL`].
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// A chat completions call: the key as a bearer token, the chat completions wire format.
static SHAPE: Shape = Shape {
    key: KeyHeader::Bearer,
    fixed_headers: &[],
    default_base_url: DEFAULT_BASE_URL,
    path: "/chat/completions",
    wire: Wire::new(
        "chat completions",
        request::body,
        errors::from_status,
        stream::events,
    ),
};

impl HttpProvider<OpenAi> {
    /// A provider with id `id` (used in errors and model refs) reaching `settings`.
    pub fn new(id: impl Into<String>, settings: OpenAiSettings) -> Result<Self, ProviderError> {
        Self::with_shape(id, settings, &SHAPE)
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
            match env_key(env, var) {
                Some(key) => Some(key),
                None => {
                    return Err(ProviderError::MissingKey {
                        provider: id.to_string(),
                        var: var.clone(),
                    });
                }
            }
        } else if config.base_url.is_none() {
            env_key(env, DEFAULT_API_KEY_ENV)
        } else {
            None
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
