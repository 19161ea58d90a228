//! One HTTP provider and the models it serves, whatever its wire format: the settings, the
//! client with its headers, and the model that streams a call, which the OpenAI-compatible and
//! the Anthropic adapters share. What sets a kind apart is its [`Shape`]; the kind parameter of
//! [`HttpProvider`] and [`HttpModel`] only keeps the two kinds apart as types.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use super::http::{Endpoint, Timeouts, Wire, describe, stream_call};
use super::{LanguageModel, ModelRequest, ModelStream, ProviderError};
use crate::config::ProviderConfig;
use crate::config::redact::{REDACTED, Redactor, url_credentials};
use crate::model::ModelRef;

/// How long connecting to the endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach a provider's HTTP endpoint.
#[derive(Clone, Default, PartialEq)]
pub struct HttpSettings {
    /// The API base URL, for example `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// The key, sent as `Authorization: Bearer <key>` to an OpenAI-compatible endpoint and as
    /// `x-api-key` to Anthropic; none sends no key header (local endpoints, proxies that add it).
    pub api_key: Option<String>,
    /// Extra headers sent with every request (`anthropic-beta`, or overrides of the key header).
    pub headers: IndexMap<String, String>,
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSettings")
            .field("base_url", &url_credentials(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What sets one kind of HTTP provider apart from another.
pub(crate) struct Shape {
    /// The base URL used when the configuration names none.
    pub default_base_url: &'static str,
    /// The path of the call, below the base URL.
    pub path: &'static str,
    /// How a request carries the key.
    pub key: KeyHeader,
    /// Headers every request carries, before the configured ones.
    pub fixed_headers: &'static [(&'static str, &'static str)],
    /// The wire format of the call.
    pub wire: Wire,
}

/// How a request carries the provider's key.
pub(crate) enum KeyHeader {
    /// As `Authorization: Bearer <key>`.
    Bearer,
    /// As it is, in the header of this name.
    Named(&'static str),
}

impl KeyHeader {
    /// The header's name.
    fn name(&self) -> HeaderName {
        match self {
            KeyHeader::Bearer => AUTHORIZATION,
            KeyHeader::Named(name) => HeaderName::from_static(name),
        }
    }

    /// The header's value for `key`.
    fn value(&self, key: &str) -> String {
        match self {
            KeyHeader::Bearer => format!("Bearer {key}"),
            KeyHeader::Named(_) => key.to_string(),
        }
    }
}

/// One configured HTTP provider of kind `K`: an HTTP client shared by all its models.
pub struct HttpProvider<K> {
    pub(super) id: String,
    pub(super) base_url: String,
    pub(super) endpoint: String,
    pub(super) headers: HeaderMap,
    client: reqwest::Client,
    timeouts: Timeouts,
    redactor: Redactor,
    shape: &'static Shape,
    kind: PhantomData<K>,
}

impl<K> fmt::Debug for HttpProvider<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("call", &self.shape.wire.call)
            .field("id", &self.id)
            .field("base_url", &url_credentials(&self.base_url))
            .finish_non_exhaustive()
    }
}

impl<K> HttpProvider<K> {
    /// A provider with id `id` (used in errors and model refs) reaching `settings` in the way
    /// `shape` says.
    pub(crate) fn with_shape(
        id: impl Into<String>,
        settings: HttpSettings,
        shape: &'static Shape,
    ) -> Result<Self, ProviderError> {
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
        for (name, value) in shape.fixed_headers {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        if let Some(key) = settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            let mut value = HeaderValue::from_str(&shape.key.value(key)).map_err(|_| {
                config_error("the API key has characters a header cannot hold".into())
            })?;
            value.set_sensitive(true);
            headers.insert(shape.key.name(), value);
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
        Ok(HttpProvider {
            redactor,
            endpoint: format!("{base_url}{}", shape.path),
            id,
            base_url,
            headers,
            client,
            timeouts: Timeouts::default(),
            shape,
            kind: PhantomData,
        })
    }

    /// The provider `[provider.<id>]` of `config` with the key `api_key` (already looked up),
    /// at the shape's default endpoint when the configuration names none.
    pub(crate) fn configured(
        id: &str,
        config: &ProviderConfig,
        api_key: Option<String>,
        shape: &'static Shape,
    ) -> Result<Self, ProviderError> {
        let settings = HttpSettings {
            base_url: config
                .base_url
                .clone()
                .unwrap_or_else(|| shape.default_base_url.to_string()),
            api_key,
            headers: config.headers.clone(),
        };
        Ok(Self::with_shape(id, settings, shape)?.with_timeouts(Timeouts::of(config)))
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

    /// Whether requests carry the key header.
    pub fn has_api_key(&self) -> bool {
        self.headers.contains_key(self.shape.key.name())
    }
}

/// The value of the environment variable `var` in `env`, trimmed; none when unset or blank.
pub(crate) fn env_key(env: &BTreeMap<String, String>, var: &str) -> Option<String> {
    env.get(var)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// One model of an [`HttpProvider`].
pub struct HttpModel<K> {
    provider: Arc<HttpProvider<K>>,
    model: ModelRef,
}

impl<K> fmt::Debug for HttpModel<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpModel")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .finish()
    }
}

impl<K> Clone for HttpModel<K> {
    fn clone(&self) -> Self {
        HttpModel {
            provider: self.provider.clone(),
            model: self.model.clone(),
        }
    }
}

impl<K> HttpModel<K> {
    /// The model `model_id` of `provider`.
    pub fn new(provider: Arc<HttpProvider<K>>, model_id: impl Into<String>) -> Self {
        let model = ModelRef::new(provider.id.clone(), model_id);
        HttpModel { provider, model }
    }

    /// The request body this model sends for `request` (for logging and tests).
    pub fn request_body(&self, request: &ModelRequest) -> serde_json::Value {
        (self.provider.shape.wire.body)(&self.model.model_id, request)
    }
}

#[async_trait::async_trait]
impl<K: Send + Sync> LanguageModel for HttpModel<K> {
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
        stream_call(
            endpoint,
            &provider.shape.wire,
            &self.model.model_id,
            request,
        )
        .await
    }
}
