//! The configured providers and the models they serve.
//!
//! [`Providers::new`] reads `[provider.*]` of the configuration once, and adds the providers
//! known by name ([`KNOWN_PROVIDERS`]: `openai`, `anthropic`, `groq`, `ollama`, …) that it does
//! not configure; a configured provider with a known name takes what it leaves out from the
//! built-in entry. OpenAI-compatible and Anthropic providers get their HTTP client and key (from
//! `api_key`, or the environment variable named by `api_key_env` or the built-in entry, looked
//! up in the given map), scripted providers load their script. A provider whose setup failed for
//! a reason that only matters when it is used (a missing key variable) does not fail the whole
//! set: asking it for a model returns that error. A script that cannot be loaded or a malformed
//! header does fail it.
//!
//! When the configuration has no `[provider.scripted]`, a provider `scripted` playing the
//! built-in `demo` script is added, so `scripted/<anything>` works offline. A scripted provider
//! without a `script` setting lets the model id pick a built-in script: `scripted/echo` plays
//! `echo`, `scripted/demo` plays `demo`, any other id the default. Every provider
//! accepts any model id (endpoints serve many models); `[provider.<id>.models.<model>]` only adds
//! limits and prices. One model instance is made per model reference and reused.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use indexmap::IndexMap;

use super::cost::cost;
use super::scripted::{BUILTIN_SCRIPTS, Script, ScriptedModel};
use super::{
    AnthropicModel, AnthropicProvider, LanguageModel, OpenAiModel, OpenAiProvider, ProviderError,
    Usage,
};
use crate::config::{
    Config, KNOWN_PROVIDERS, ModelConfig, ProviderConfig, ProviderKind, known_provider,
};
use crate::model::ModelRef;

/// The id of the implicit scripted provider.
pub const SCRIPTED_PROVIDER: &str = "scripted";

/// The script the implicit scripted provider (and a scripted provider naming none) plays.
pub const DEFAULT_SCRIPT: &str = "demo";

/// One provider, ready to make models.
enum Entry {
    /// An OpenAI-compatible endpoint.
    OpenAi(Arc<OpenAiProvider>),
    /// Anthropic's Messages API.
    Anthropic(Arc<AnthropicProvider>),
    /// A scripted model; when `by_model`, a model id naming a built-in script plays that script.
    Scripted {
        /// The configured (or default) script.
        script: Arc<Script>,
        /// No script is configured: `scripted/echo` plays `echo`, `scripted/demo` plays `demo`.
        by_model: bool,
    },
    /// A provider that fails when used, with the reason.
    Unavailable(ProviderError),
}

/// The configured providers: model references → model instances.
pub struct Providers {
    entries: IndexMap<String, Entry>,
    configs: IndexMap<String, ProviderConfig>,
    models: Mutex<HashMap<ModelRef, Arc<dyn LanguageModel>>>,
}

impl fmt::Debug for Providers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Providers")
            .field("providers", &self.entries.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// The providers of `config`; API key variables are looked up in `env`.
    pub fn new(config: &Config, env: &BTreeMap<String, String>) -> Result<Self, ProviderError> {
        let mut entries = IndexMap::new();
        let known = KNOWN_PROVIDERS
            .iter()
            .filter(|k| !config.provider.contains_key(k.id))
            .map(|k| (k.id.to_string(), k.settings(None, env)));
        let configured = config.provider.iter().map(|(id, provider)| {
            let settings = match known_provider(id) {
                Some(k) => k.settings(Some(provider), env),
                None => provider.clone(),
            };
            (id.clone(), settings)
        });
        for (id, provider) in configured.collect::<Vec<_>>().into_iter().chain(known) {
            let (id, provider) = (&id, &provider);
            let kind = provider
                .kind
                .or_else(|| ProviderKind::from_provider_id(id))
                .ok_or_else(|| ProviderError::Config {
                    provider: id.clone(),
                    message: format!(
                        "no `type`; set provider.{id}.type to one of {}",
                        ProviderKind::NAMES.join(", ")
                    ),
                })?;
            let entry = match kind {
                ProviderKind::Openai => usable_later(
                    OpenAiProvider::from_config(id, provider, env)
                        .map(|p| Entry::OpenAi(Arc::new(p))),
                )?,
                ProviderKind::Anthropic => usable_later(
                    AnthropicProvider::from_config(id, provider, env)
                        .map(|p| Entry::Anthropic(Arc::new(p))),
                )?,
                ProviderKind::Scripted => {
                    let spec = provider.script.as_deref().unwrap_or(DEFAULT_SCRIPT);
                    let script = Script::load(spec).map_err(|e| ProviderError::Config {
                        provider: id.clone(),
                        message: e.to_string(),
                    })?;
                    Entry::Scripted {
                        script: Arc::new(script),
                        by_model: provider.script.is_none(),
                    }
                }
            };
            entries.insert(id.clone(), entry);
        }
        if !entries.contains_key(SCRIPTED_PROVIDER) {
            let script = Script::load(DEFAULT_SCRIPT).map_err(|e| ProviderError::Config {
                provider: SCRIPTED_PROVIDER.into(),
                message: e.to_string(),
            })?;
            entries.insert(
                SCRIPTED_PROVIDER.into(),
                Entry::Scripted {
                    script: Arc::new(script),
                    by_model: true,
                },
            );
        }
        Ok(Providers {
            entries,
            configs: config.provider.clone(),
            models: Mutex::new(HashMap::new()),
        })
    }

    /// The model `m`, made on first use and shared afterwards.
    pub fn model(&self, m: &ModelRef) -> Result<Arc<dyn LanguageModel>, ProviderError> {
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(model) = models.get(m) {
            return Ok(model.clone());
        }
        let model: Arc<dyn LanguageModel> = match self.entries.get(&m.provider_id) {
            Some(Entry::OpenAi(provider)) => {
                Arc::new(OpenAiModel::new(provider.clone(), m.model_id.clone()))
            }
            Some(Entry::Anthropic(provider)) => {
                Arc::new(AnthropicModel::new(provider.clone(), m.model_id.clone()))
            }
            Some(Entry::Scripted { script, by_model }) => {
                let named = (*by_model && BUILTIN_SCRIPTS.contains(&m.model_id.as_str()))
                    .then(|| Script::load(&m.model_id).ok())
                    .flatten();
                let script = named.map_or_else(|| script.clone(), Arc::new);
                Arc::new(ScriptedModel::new(m.clone(), script))
            }
            Some(Entry::Unavailable(_)) | None => return Err(self.unusable(&m.provider_id)),
        };
        models.insert(m.clone(), model.clone());
        Ok(model)
    }

    /// Uses `model` for its model reference from now on (embedders' own models, tests).
    pub fn insert_model(&self, model: Arc<dyn LanguageModel>) {
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        models.insert(model.model().clone(), model);
    }

    /// The configured limits and prices of `m`, if any.
    pub fn model_config(&self, m: &ModelRef) -> Option<&ModelConfig> {
        self.configs.get(&m.provider_id)?.models.get(&m.model_id)
    }

    /// The USD cost of `usage` on model `m` (0 when it has no prices).
    pub fn cost(&self, m: &ModelRef, usage: &Usage) -> f64 {
        cost(usage, self.model_config(m).and_then(|c| c.cost.as_ref()))
    }

    /// The provider ids: the configured ones in their order, then the unconfigured ones known by
    /// name, then the implicit `scripted`.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Checks that provider `id` exists and can make models: an unknown provider or a missing
    /// key is an error saying what to set, found before anything is asked of the provider.
    pub fn check(&self, id: &str) -> Result<(), ProviderError> {
        if self.is_available(id) {
            Ok(())
        } else {
            Err(self.unusable(id))
        }
    }

    /// Why provider `id` cannot make models.
    fn unusable(&self, id: &str) -> ProviderError {
        match self.entries.get(id) {
            Some(Entry::Unavailable(error)) => error.clone(),
            _ => ProviderError::UnknownProvider {
                provider: id.to_string(),
                known: self.ids().map(str::to_string).collect(),
            },
        }
    }

    /// Whether provider `id` exists and can make models.
    pub fn is_available(&self, id: &str) -> bool {
        matches!(
            self.entries.get(id),
            Some(Entry::OpenAi(_) | Entry::Anthropic(_) | Entry::Scripted { .. })
        )
    }
}

/// The entry of an HTTP provider whose setup gave `made`: a setup that failed only because the
/// key is missing gives an entry that fails when used, as a missing key only matters then; any
/// other failure fails the whole set.
fn usable_later(made: Result<Entry, ProviderError>) -> Result<Entry, ProviderError> {
    match made {
        Err(e @ ProviderError::MissingKey { .. }) => Ok(Entry::Unavailable(e)),
        made => made,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_can_be_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Providers>();
        let p = Providers::new(&Config::default(), &BTreeMap::new()).unwrap();
        assert!(format!("{p:?}").contains("scripted"));
        assert!(p.is_available("scripted"));
        assert!(!p.is_available("openai"));
    }

    #[test]
    fn known_providers_need_only_their_key() {
        let env = BTreeMap::from([("GROQ_API_KEY".to_string(), "gsk".to_string())]);
        let p = Providers::new(&Config::default(), &env).unwrap();
        assert!(p.check("groq").is_ok());
        assert!(p.check("ollama").is_ok(), "a local server takes no key");
        assert_eq!(
            p.check("openai").unwrap_err().to_string(),
            "provider \"openai\" needs an API key: set OPENAI_API_KEY"
        );
        assert!(p.model(&ModelRef::new("openai", "gpt-4o-mini")).is_err());
        assert_eq!(
            p.check("foo").unwrap_err().to_string(),
            "unknown provider \"foo\": configure [provider.foo] with type and base_url in taskforce.toml (known providers: openai, anthropic, openrouter, groq, deepseek, mistral, ollama, lmstudio, scripted)"
        );
    }

    #[test]
    fn implicit_scripted_provider() {
        let p = Providers::new(&Config::default(), &BTreeMap::new()).unwrap();
        assert_eq!(p.ids().last(), Some("scripted"));
        let m = ModelRef::new("scripted", "anything");
        let a = p.model(&m).unwrap();
        let b = p.model(&m).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.model(), &m);
    }

    #[test]
    fn bad_script_fails_construction() {
        let mut config = Config::default();
        config.provider.insert(
            "scripted".into(),
            ProviderConfig {
                script: Some("/no/such/file.json".into()),
                ..ProviderConfig::default()
            },
        );
        let err = Providers::new(&config, &BTreeMap::new()).unwrap_err();
        assert!(matches!(err, ProviderError::Config { .. }), "{err}");
    }
}
