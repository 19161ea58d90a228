//! The providers taskforce knows by name: a model of theirs works with only the key in the
//! environment, and a `[provider.NAME]` section overrides or extends the built-in entry.

use std::collections::BTreeMap;

use super::{ProviderConfig, ProviderKind};

/// A provider known by name: its wire format, endpoint and key variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownProvider {
    /// The id used in model strings (`openai` of `openai/gpt-4o-mini`).
    pub id: &'static str,
    /// The wire format it speaks.
    pub kind: ProviderKind,
    /// The API base URL.
    pub base_url: &'static str,
    /// The environment variable holding the key; none for local servers that take no key.
    pub api_key_env: Option<&'static str>,
}

/// Every provider known by name, in the order they are listed to people.
pub const KNOWN_PROVIDERS: [KnownProvider; 8] = [
    http(
        "openai",
        ProviderKind::Openai,
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
    ),
    http(
        "anthropic",
        ProviderKind::Anthropic,
        "https://api.anthropic.com/v1",
        Some("ANTHROPIC_API_KEY"),
    ),
    http(
        "openrouter",
        ProviderKind::Openai,
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
    ),
    http(
        "groq",
        ProviderKind::Openai,
        "https://api.groq.com/openai/v1",
        Some("GROQ_API_KEY"),
    ),
    http(
        "deepseek",
        ProviderKind::Openai,
        "https://api.deepseek.com/v1",
        Some("DEEPSEEK_API_KEY"),
    ),
    http(
        "mistral",
        ProviderKind::Openai,
        "https://api.mistral.ai/v1",
        Some("MISTRAL_API_KEY"),
    ),
    http(
        "ollama",
        ProviderKind::Openai,
        "http://127.0.0.1:11434/v1",
        None,
    ),
    http(
        "lmstudio",
        ProviderKind::Openai,
        "http://127.0.0.1:1234/v1",
        None,
    ),
];

const fn http(
    id: &'static str,
    kind: ProviderKind,
    base_url: &'static str,
    api_key_env: Option<&'static str>,
) -> KnownProvider {
    KnownProvider {
        id,
        kind,
        base_url,
        api_key_env,
    }
}

/// The provider known by the name `id`, if any.
pub fn known_provider(id: &str) -> Option<&'static KnownProvider> {
    KNOWN_PROVIDERS.iter().find(|p| p.id == id)
}

impl KnownProvider {
    /// The settings of this provider: `configured` (its `[provider.<id>]`, when written) with
    /// what it leaves out taken from the built-in entry. At the built-in endpoint the key is read
    /// from the built-in variable unless `api_key` or `api_key_env` says otherwise; at another
    /// `base_url` (a proxy, a test server) that variable is used only when `env` has it.
    pub fn settings(
        &self,
        configured: Option<&ProviderConfig>,
        env: &BTreeMap<String, String>,
    ) -> ProviderConfig {
        let mut out = configured.cloned().unwrap_or_default();
        out.kind.get_or_insert(self.kind);
        let own_endpoint = out.base_url.is_none();
        out.base_url
            .get_or_insert_with(|| self.base_url.to_string());
        if out.api_key.is_none() && out.api_key_env.is_none() {
            out.api_key_env = self
                .api_key_env
                .filter(|var| own_endpoint || env.get(*var).is_some_and(|v| !v.trim().is_empty()))
                .map(str::to_string);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_provider_needs_no_configuration() {
        let groq = known_provider("groq")
            .unwrap()
            .settings(None, &BTreeMap::new());
        assert_eq!(groq.kind, Some(ProviderKind::Openai));
        assert_eq!(
            groq.base_url.as_deref(),
            Some("https://api.groq.com/openai/v1")
        );
        assert_eq!(groq.api_key_env.as_deref(), Some("GROQ_API_KEY"));
        let ollama = known_provider("ollama")
            .unwrap()
            .settings(None, &BTreeMap::new());
        assert_eq!(ollama.api_key_env, None);
        assert_eq!(
            known_provider("anthropic").unwrap().kind,
            ProviderKind::Anthropic
        );
        assert!(known_provider("foo").is_none());
    }

    #[test]
    fn configuration_overrides_the_built_in_entry() {
        let openai = known_provider("openai").unwrap();
        let local = ProviderConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..ProviderConfig::default()
        };
        // Another endpoint: the built-in key variable when it is set, else no key.
        let with_key = openai.settings(
            Some(&local),
            &BTreeMap::from([("OPENAI_API_KEY".into(), "sk".into())]),
        );
        assert_eq!(with_key.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(with_key.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(
            openai.settings(Some(&local), &BTreeMap::new()).api_key_env,
            None
        );
        // A variable of one's own wins.
        let named = ProviderConfig {
            api_key_env: Some("MY_KEY".into()),
            ..ProviderConfig::default()
        };
        let s = openai.settings(Some(&named), &BTreeMap::new());
        assert_eq!(s.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(s.base_url.as_deref(), Some("https://api.openai.com/v1"));
    }
}
