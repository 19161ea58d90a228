//! `/config/providers`, `/provider` and `/provider/auth`: the runtime's providers and models in
//! OpenCode's two shapes; OpenCode's sign-in flows, which taskforce does not have, answer
//! what to do instead.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::{Map, Value};
use taskforce_agents::config::ModelConfig;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::catalog::{self, CatalogProvider};
use super::{DirectoryQuery, check_directory};

/// The answer of `GET /config/providers`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ConfigProviders {
    /// The providers that can make models now and have models to offer.
    pub providers: Vec<Provider>,
    /// Each provider's default model id, by provider id.
    pub default: BTreeMap<String, String>,
}

/// A provider as `GET /config/providers` describes it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Provider {
    /// The id used in model strings.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// `config` (a `[provider.X]` table), `env` (known by name) or `custom` (built in).
    pub source: String,
    /// The environment variables its key is read from.
    pub env: Vec<String>,
    /// Provider options (none are exposed).
    #[schema(value_type = Object)]
    pub options: Map<String, Value>,
    /// Its models by id.
    pub models: BTreeMap<String, Model>,
}

/// A model as `GET /config/providers` describes it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Model {
    /// The model id.
    pub id: String,
    /// Its provider's id.
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// How it is reached.
    pub api: ModelApi,
    /// Its display name (the configured `name`, else the id).
    pub name: String,
    /// What it can do (what taskforce uses of it: text in and out, tool calls).
    pub capabilities: Capabilities,
    /// Prices in USD per million tokens (0 when the configuration gives none).
    pub cost: Cost,
    /// Token limits (0 when the configuration gives none).
    pub limit: Limit,
    /// Always `active`.
    pub status: String,
    /// Model options (none).
    #[schema(value_type = Object)]
    pub options: Map<String, Value>,
    /// Extra headers (none are exposed).
    pub headers: BTreeMap<String, String>,
    /// Unknown to taskforce: empty.
    pub release_date: String,
}

/// How a model is reached.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ModelApi {
    /// The model id sent to the API.
    pub id: String,
    /// The API base URL.
    pub url: String,
    /// The npm package OpenCode would use for this wire format (empty for `scripted`).
    pub npm: String,
}

/// What a model can do.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Capabilities {
    pub temperature: bool,
    pub reasoning: bool,
    pub attachment: bool,
    pub toolcall: bool,
    pub input: Modalities,
    pub output: Modalities,
    pub interleaved: bool,
}

/// Which kinds of content go in or out.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Modalities {
    pub text: bool,
    pub audio: bool,
    pub image: bool,
    pub video: bool,
    pub pdf: bool,
}

/// Prices in USD per million tokens.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache: CacheCost,
}

/// Prompt-cache prices in USD per million tokens.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CacheCost {
    pub read: f64,
    pub write: f64,
}

/// Token limits.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Limit {
    /// The context window.
    pub context: u64,
    /// The most output tokens per response.
    pub output: u64,
}

/// The answer of `GET /provider`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderList {
    /// Every provider, connected or not.
    pub all: Vec<ListedProvider>,
    /// Each provider's default model id, by provider id.
    pub default: BTreeMap<String, String>,
    /// The ids of the providers that can make models now.
    pub connected: Vec<String>,
}

/// A provider as `GET /provider` describes it (models.dev's shape).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ListedProvider {
    pub id: String,
    pub name: String,
    /// The API base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The npm package OpenCode would use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npm: Option<String>,
    pub env: Vec<String>,
    pub models: BTreeMap<String, ListedModel>,
}

/// A model as `GET /provider` describes it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ListedModel {
    pub id: String,
    pub name: String,
    pub release_date: String,
    pub attachment: bool,
    pub reasoning: bool,
    pub temperature: bool,
    pub tool_call: bool,
    /// Prices, when the configuration gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<ListedCost>,
    pub limit: Limit,
    #[schema(value_type = Object)]
    pub options: Map<String, Value>,
}

/// Prices in USD per million tokens, models.dev's way.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ListedCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

fn limit(config: &ModelConfig) -> Limit {
    Limit {
        context: config.context.unwrap_or(0),
        output: config.output.unwrap_or(0),
    }
}

fn name_of(id: &str, config: &ModelConfig) -> String {
    config.name.clone().unwrap_or_else(|| id.to_string())
}

fn text_only() -> Modalities {
    Modalities {
        text: true,
        audio: false,
        image: false,
        video: false,
        pdf: false,
    }
}

fn config_provider(p: &CatalogProvider) -> Provider {
    let models = p
        .models
        .iter()
        .map(|(id, config)| {
            let cost = config.cost.unwrap_or_default();
            let model = Model {
                id: id.clone(),
                provider_id: p.id.clone(),
                api: ModelApi {
                    id: id.clone(),
                    url: p.base_url.clone(),
                    npm: p.npm().to_string(),
                },
                name: name_of(id, config),
                capabilities: Capabilities {
                    temperature: true,
                    reasoning: false,
                    attachment: false,
                    toolcall: true,
                    input: text_only(),
                    output: text_only(),
                    interleaved: false,
                },
                cost: Cost {
                    input: cost.input,
                    output: cost.output,
                    cache: CacheCost {
                        read: cost.cache_read,
                        write: cost.cache_write,
                    },
                },
                limit: limit(config),
                status: "active".into(),
                options: Map::new(),
                headers: BTreeMap::new(),
                release_date: String::new(),
            };
            (id.clone(), model)
        })
        .collect();
    Provider {
        id: p.id.clone(),
        name: p.name.clone(),
        source: p.source.as_str().into(),
        env: p.env.clone(),
        options: Map::new(),
        models,
    }
}

fn listed_provider(p: &CatalogProvider) -> ListedProvider {
    let models = p
        .models
        .iter()
        .map(|(id, config)| {
            let model = ListedModel {
                id: id.clone(),
                name: name_of(id, config),
                release_date: String::new(),
                attachment: false,
                reasoning: false,
                temperature: true,
                tool_call: true,
                cost: config.cost.map(|c| ListedCost {
                    input: c.input,
                    output: c.output,
                    cache_read: c.cache_read,
                    cache_write: c.cache_write,
                }),
                limit: limit(config),
                options: Map::new(),
            };
            (id.clone(), model)
        })
        .collect();
    ListedProvider {
        id: p.id.clone(),
        name: p.name.clone(),
        api: Some(p.base_url.clone()).filter(|u| !u.is_empty()),
        npm: Some(p.npm().to_string()).filter(|n| !n.is_empty()),
        env: p.env.clone(),
        models,
    }
}

/// `GET /config/providers`: the providers that can make models and have models to offer.
#[utoipa::path(
    get,
    path = "/config/providers",
    operation_id = "config.providers",
    summary = "The providers that can make models, with their models and defaults",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = ConfigProviders), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn config_providers(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<ConfigProviders>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let all = catalog::providers(&state.runtime);
    // A provider without models (a local server nothing names) offers nothing to pick.
    let connected: Vec<CatalogProvider> = all
        .into_iter()
        .filter(|p| p.connected && !p.models.is_empty())
        .collect();
    Ok(Json(ConfigProviders {
        default: catalog::defaults(&state.runtime, &connected),
        providers: connected.iter().map(config_provider).collect(),
    }))
}

/// `GET /provider`: every provider, which are connected, and their default models.
#[utoipa::path(
    get,
    path = "/provider",
    operation_id = "provider.list",
    summary = "Every provider, the connected ones and their default models",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = ProviderList), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<ProviderList>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let all = catalog::providers(&state.runtime);
    Ok(Json(ProviderList {
        default: catalog::defaults(&state.runtime, &all),
        connected: all
            .iter()
            .filter(|p| p.connected)
            .map(|p| p.id.clone())
            .collect(),
        all: all.iter().map(listed_provider).collect(),
    }))
}

/// `GET /provider/auth`: sign-in methods by provider; taskforce has none (keys come from the
/// configuration or the environment).
#[utoipa::path(
    get,
    path = "/provider/auth",
    operation_id = "provider.auth",
    summary = "Sign-in methods by provider (none: keys come from the configuration or environment)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Object), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn auth(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Map<String, Value>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(Map::new()))
}

/// The error of every sign-in flow.
fn sign_in_unsupported(provider: &str) -> ApiError {
    ApiError::bad_request(format!(
        "provider `{provider}`: signing in is not supported by taskforce; put the key in the \
         environment variable the provider reads (`api_key_env` in its [provider.{provider}] \
         table) and restart"
    ))
}

/// `POST /provider/:id/oauth/authorize`: not supported (400).
#[utoipa::path(
    post,
    path = "/provider/{providerID}/oauth/authorize",
    operation_id = "provider.oauth.authorize",
    summary = "OAuth sign-in: not supported by taskforce (400)",
    params(("providerID" = String, Path, description = "The provider")),
    responses((status = 400, description = "Signing in is not supported", body = ErrorBody))
)]
pub async fn oauth_authorize(Path(provider): Path<String>) -> ApiError {
    sign_in_unsupported(&provider)
}

/// `POST /provider/:id/oauth/callback`: not supported (400).
#[utoipa::path(
    post,
    path = "/provider/{providerID}/oauth/callback",
    operation_id = "provider.oauth.callback",
    summary = "OAuth sign-in: not supported by taskforce (400)",
    params(("providerID" = String, Path, description = "The provider")),
    responses((status = 400, description = "Signing in is not supported", body = ErrorBody))
)]
pub async fn oauth_callback(Path(provider): Path<String>) -> ApiError {
    sign_in_unsupported(&provider)
}

/// `PUT /auth/:id`: storing keys is not supported (400).
#[utoipa::path(
    put,
    path = "/auth/{providerID}",
    operation_id = "auth.set",
    summary = "Store a provider key: not supported by taskforce (400)",
    params(("providerID" = String, Path, description = "The provider")),
    responses((status = 400, description = "Storing keys is not supported", body = ErrorBody))
)]
pub async fn auth_set(Path(provider): Path<String>) -> ApiError {
    sign_in_unsupported(&provider)
}

/// `DELETE /auth/:id`: there are no stored keys to remove (400).
#[utoipa::path(
    delete,
    path = "/auth/{providerID}",
    operation_id = "auth.remove",
    summary = "Remove a stored provider key: not supported by taskforce (400)",
    params(("providerID" = String, Path, description = "The provider")),
    responses((status = 400, description = "Storing keys is not supported", body = ErrorBody))
)]
pub async fn auth_remove(Path(provider): Path<String>) -> ApiError {
    sign_in_unsupported(&provider)
}
