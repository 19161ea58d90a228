//! `[search]`: the backend of the `websearch` and `codesearch` tools. With no engine set the
//! tools are not offered at all.

use serde::{Deserialize, Serialize};

/// The endpoint of Exa's hosted search (the MCP server OpenCode calls).
pub const EXA_BASE_URL: &str = "https://mcp.exa.ai/mcp";

/// Which search service answers `websearch` and `codesearch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchEngine {
    /// An Exa-compatible endpoint (Exa's MCP server, OpenCode's default backend).
    Exa,
    /// A self-hosted SearXNG instance, through its JSON API.
    Searxng,
}

impl SearchEngine {
    /// Every engine, as written in config.
    pub const NAMES: [&'static str; 2] = ["exa", "searxng"];

    /// The engine's name as written in config.
    pub fn name(self) -> &'static str {
        match self {
            SearchEngine::Exa => "exa",
            SearchEngine::Searxng => "searxng",
        }
    }
}

/// `[search]`: the search backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// `exa` or `searxng`; none: the search tools are not offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<SearchEngine>,
    /// Exa: the endpoint ([`EXA_BASE_URL`] when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Exa: the environment variable holding the API key (sent as `x-api-key`); without one
    /// Exa's free, rate-limited tier answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// SearXNG: the instance's address (`http://127.0.0.1:8888`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl SearchConfig {
    /// Whether a backend is configured (the search tools are offered).
    pub fn is_configured(&self) -> bool {
        self.engine.is_some()
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == SearchConfig::default()
    }

    /// Checks the keys against the engine: `(key, what is wrong)` for the first problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, message: String| Err((format!("search.{key}"), message));
        let Some(engine) = self.engine else {
            if self.is_empty() {
                return Ok(());
            }
            return bad(
                "engine",
                format!("missing; expected one of {}", names().join(", ")),
            );
        };
        let (needed, foreign): (&[&str], &[(&str, bool)]) = match engine {
            SearchEngine::Exa => (&[], &[("url", self.url.is_some())]),
            SearchEngine::Searxng => (
                &["url"],
                &[
                    ("base_url", self.base_url.is_some()),
                    ("api_key_env", self.api_key_env.is_some()),
                ],
            ),
        };
        let name = engine.name();
        if let Some((key, _)) = foreign.iter().find(|(_, set)| *set) {
            let hint = match engine {
                SearchEngine::Exa => "its endpoint is `base_url`",
                SearchEngine::Searxng => "it takes only `url`",
            };
            return bad(key, format!("not used by engine `{name}`; {hint}"));
        }
        if needed.contains(&"url") && self.url.is_none() {
            return bad(
                "url",
                "missing; engine `searxng` needs the instance's address, e.g. \"http://127.0.0.1:8888\"".into(),
            );
        }
        for (key, value) in [("base_url", &self.base_url), ("url", &self.url)] {
            if let Some(value) = value {
                check_http_url(value).or_else(|message| bad(key, message))?;
            }
        }
        if let Some(var) = &self.api_key_env
            && var.trim().is_empty()
        {
            return bad("api_key_env", "must name an environment variable".into());
        }
        Ok(())
    }
}

/// The engine names, quoted for messages.
fn names() -> Vec<String> {
    SearchEngine::NAMES.map(|n| format!("`{n}`")).to_vec()
}

/// Whether `value` is an absolute `http://` or `https://` URL with a host.
fn check_http_url(value: &str) -> Result<(), String> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
        Ok(url) => Err(format!(
            "{value:?} is not an http:// or https:// address (scheme `{}`)",
            url.scheme()
        )),
        Err(e) => Err(format!("{value:?} is not a URL ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[search]` section from `key = "value"` lines.
    fn config(lines: &str) -> SearchConfig {
        serde_json::from_value(table(lines)).unwrap()
    }

    fn table(lines: &str) -> serde_json::Value {
        lines
            .lines()
            .filter_map(|l| l.split_once(" = "))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').into()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    #[test]
    fn nothing_set_is_no_backend_and_valid() {
        let c = SearchConfig::default();
        assert!(!c.is_configured());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn exa_needs_nothing_more_and_searxng_needs_its_url() {
        assert_eq!(config("engine = \"exa\"").validate(), Ok(()));
        let (key, message) = config("engine = \"searxng\"").validate().unwrap_err();
        assert_eq!(key, "search.url");
        assert!(
            message.contains("needs the instance's address"),
            "{message}"
        );
        assert_eq!(
            config("engine = \"searxng\"\nurl = \"http://127.0.0.1:8888\"").validate(),
            Ok(())
        );
    }

    #[test]
    fn keys_of_the_other_engine_and_bad_addresses_are_named() {
        let (key, message) = config("engine = \"exa\"\nurl = \"http://x\"")
            .validate()
            .unwrap_err();
        assert_eq!(key, "search.url");
        assert!(message.contains("`base_url`"), "{message}");
        let (key, _) = config("engine = \"searxng\"\nurl = \"http://x\"\napi_key_env = \"K\"")
            .validate()
            .unwrap_err();
        assert_eq!(key, "search.api_key_env");
        let (key, message) = config("engine = \"searxng\"\nurl = \"ftp://x\"")
            .validate()
            .unwrap_err();
        assert_eq!(key, "search.url");
        assert!(message.contains("not an http:// or https://"), "{message}");
        let (key, message) = config("url = \"http://x\"").validate().unwrap_err();
        assert_eq!(key, "search.engine");
        assert!(message.contains("`exa`, `searxng`"), "{message}");
    }

    #[test]
    fn an_unknown_engine_names_the_known_ones() {
        let e = serde_json::from_value::<SearchConfig>(table("engine = \"google\"")).unwrap_err();
        assert!(e.to_string().contains("expected `exa` or `searxng`"), "{e}");
    }
}
