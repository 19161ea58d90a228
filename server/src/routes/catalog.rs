//! The providers and models the runtime knows, gathered once for `/config/providers` and
//! `/provider`: configured providers, those known by name, the built-in `scripted`; each
//! with the models its `[provider.X.models]` table lists and those the configuration names
//! (`model`, `small_model`, agents' models).

use taskforce_actors::Runtime;
use taskforce_agents::config::{ModelConfig, ProviderKind, known_provider};
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::SCRIPTED_PROVIDER;
use taskforce_agents::provider::scripted::BUILTIN_SCRIPTS;

/// Where a provider's settings come from, as OpenCode names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A `[provider.X]` table.
    Config,
    /// Known by name, its key read from the environment.
    Env,
    /// Built into taskforce (`scripted`).
    Custom,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Config => "config",
            Source::Env => "env",
            Source::Custom => "custom",
        }
    }
}

/// One provider as the catalog describes it.
#[derive(Debug, Clone)]
pub(crate) struct CatalogProvider {
    pub id: String,
    pub name: String,
    pub kind: ProviderKind,
    /// The API base URL (credentials in it redacted); empty for `scripted`.
    pub base_url: String,
    /// The environment variables its key is read from.
    pub env: Vec<String>,
    pub source: Source,
    /// Whether it can make models now (its key is there, or it needs none).
    pub connected: bool,
    /// Its models, in listing order, with their configured limits and prices.
    pub models: Vec<(String, ModelConfig)>,
}

impl CatalogProvider {
    /// The npm package OpenCode would load for this wire format.
    pub(crate) fn npm(&self) -> &'static str {
        match self.kind {
            ProviderKind::Openai if self.id == "openai" => "@ai-sdk/openai",
            ProviderKind::Openai => "@ai-sdk/openai-compatible",
            ProviderKind::Anthropic => "@ai-sdk/anthropic",
            ProviderKind::Scripted => "",
        }
    }
}

/// Every provider of `runtime`, in the order the runtime lists them.
pub(crate) fn providers(runtime: &Runtime) -> Vec<CatalogProvider> {
    let config = runtime.config();
    let named = named_models(runtime);
    runtime
        .providers()
        .ids()
        .map(|id| {
            let configured = config.provider.get(id);
            let known = known_provider(id);
            let kind = configured
                .and_then(|p| p.kind)
                .or_else(|| ProviderKind::from_provider_id(id))
                .unwrap_or(ProviderKind::Openai);
            let base_url = configured
                .map(|p| p.redacted())
                .and_then(|p| p.base_url)
                .or_else(|| known.map(|k| k.base_url.to_string()))
                .unwrap_or_default();
            let env = configured
                .and_then(|p| p.api_key_env.clone())
                .or_else(|| known.and_then(|k| k.api_key_env).map(str::to_string))
                .into_iter()
                .collect();
            let source = if configured.is_some() {
                Source::Config
            } else if id == SCRIPTED_PROVIDER {
                Source::Custom
            } else {
                Source::Env
            };
            let mut models: Vec<(String, ModelConfig)> = configured
                .map(|p| {
                    p.models
                        .iter()
                        .map(|(m, c)| (m.clone(), c.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let plays_by_name =
                id == SCRIPTED_PROVIDER && configured.is_none_or(|p| p.script.is_none());
            let builtin = BUILTIN_SCRIPTS
                .iter()
                .filter(|_| plays_by_name)
                .map(|s| s.to_string());
            let mentioned = named
                .iter()
                .filter(|m| m.provider_id == id)
                .map(|m| m.model_id.clone());
            for model in mentioned.chain(builtin) {
                if !models.iter().any(|(m, _)| *m == model) {
                    models.push((model, ModelConfig::default()));
                }
            }
            CatalogProvider {
                id: id.to_string(),
                name: display_name(id),
                kind,
                base_url: if kind == ProviderKind::Scripted {
                    String::new()
                } else {
                    base_url
                },
                env,
                source,
                connected: runtime.providers().is_available(id),
                models,
            }
        })
        .collect()
}

/// The model prompts run on when they name none: the default agent's, else `model`.
pub(crate) fn default_model(runtime: &Runtime) -> Option<ModelRef> {
    runtime
        .registry()
        .default_agent()
        .model
        .clone()
        .or_else(|| runtime.config().model.clone())
}

/// Each provider's default model (the runtime's default for its provider, else the first
/// listed), for providers with models.
pub(crate) fn defaults(
    runtime: &Runtime,
    providers: &[CatalogProvider],
) -> std::collections::BTreeMap<String, String> {
    let default = default_model(runtime);
    providers
        .iter()
        .filter_map(|p| {
            let model = match &default {
                Some(m) if m.provider_id == p.id => m.model_id.clone(),
                _ => p.models.first()?.0.clone(),
            };
            Some((p.id.clone(), model))
        })
        .collect()
}

/// The models the configuration names outside provider tables, default first.
fn named_models(runtime: &Runtime) -> Vec<ModelRef> {
    let config = runtime.config();
    default_model(runtime)
        .into_iter()
        .chain(config.model.clone())
        .chain(config.small_model.clone())
        .chain(runtime.registry().list().filter_map(|a| a.model.clone()))
        .collect()
}

/// How a provider is shown to people.
fn display_name(id: &str) -> String {
    let name = match id {
        "openai" => "OpenAI",
        "anthropic" => "Anthropic",
        "openrouter" => "OpenRouter",
        "groq" => "Groq",
        "deepseek" => "DeepSeek",
        "mistral" => "Mistral",
        "ollama" => "Ollama",
        "lmstudio" => "LM Studio",
        "scripted" => "Scripted (taskforce)",
        other => other,
    };
    name.to_string()
}
