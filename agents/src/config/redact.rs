//! Keeping provider credentials out of what is shown and logged: API keys, header values and
//! credentials inside URLs (`https://user:pass@host` -> `https://[redacted]@host`) become
//! [`REDACTED`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use aho_corasick::AhoCorasick;

use super::schema::{Config, ProviderConfig, Secret};

/// What a credential is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not searched for in text: they would hide ordinary words.
const MIN_SECRET_LEN: usize = 4;

/// `text` with the user-info part of every `scheme://user:pass@host` replaced.
pub fn url_credentials(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The authority ends at a path, query, fragment, whitespace or a quote.
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(user_end) if user_end > 0 => {
                out.push_str(REDACTED);
                out.push_str(&authority[user_end..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The user-info of a URL (`user:pass` of `https://user:pass@host/…`), if it has one.
pub fn url_user_info(url: &str) -> Option<&str> {
    let (_, tail) = url.split_once("://")?;
    let end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
    let authority = &tail[..end];
    authority.rfind('@').map(|at| &authority[..at])
}

/// Replaces a fixed set of secrets, and URL credentials, in text.
#[derive(Clone, Default)]
pub struct Redactor {
    matcher: Option<AhoCorasick>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor")
    }
}

impl Redactor {
    /// A redactor of `secrets` (each a literal; very short ones are left alone).
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Redactor {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(|s| s.as_ref().trim().to_string())
            .filter(|s| s.chars().count() >= MIN_SECRET_LEN)
            .collect();
        // Longest first, so that a secret containing another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let matcher = (!secrets.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .build(&secrets)
                    .ok()
            })
            .flatten();
        Redactor { matcher }
    }

    /// The secrets one provider uses: its key, its header values and its URL credentials.
    pub fn for_provider<'a>(
        api_key: Option<&'a str>,
        headers: impl IntoIterator<Item = &'a String>,
        base_url: &'a str,
    ) -> Redactor {
        Redactor::new(provider_secrets(api_key, headers, base_url))
    }

    /// `text` with every secret and URL credential replaced by [`REDACTED`].
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let text = match &self.matcher {
            Some(matcher) if matcher.is_match(text) => {
                let replacements = vec![REDACTED; matcher.patterns_len()];
                Cow::Owned(matcher.replace_all(text, &replacements))
            }
            _ => Cow::Borrowed(text),
        };
        match text {
            Cow::Borrowed(t) => url_credentials(t),
            Cow::Owned(t) => Cow::Owned(url_credentials(&t).into_owned()),
        }
    }
}

fn provider_secrets<'a>(
    api_key: Option<&'a str>,
    headers: impl IntoIterator<Item = &'a String>,
    base_url: &'a str,
) -> Vec<String> {
    let mut secrets: Vec<String> = api_key.into_iter().map(str::to_string).collect();
    for value in headers {
        secrets.push(value.clone());
        // `Bearer <token>`: the token alone may be echoed too.
        if let Some((_, token)) = value.trim().split_once(' ') {
            secrets.push(token.to_string());
        }
    }
    if let Some(info) = url_user_info(base_url) {
        secrets.push(info.to_string());
        if let Some((user, password)) = info.split_once(':') {
            secrets.push(user.to_string());
            secrets.push(password.to_string());
        }
    }
    secrets
}

/// Every credential `config` holds or names: provider keys (written, or read from the
/// variable `api_key_env` names or a known provider's variable), header values and URL
/// credentials.
pub fn secrets(config: &Config, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut all = Vec::new();
    for provider in config.provider.values() {
        let from_env = provider.api_key_env.as_ref().and_then(|var| env.get(var));
        let key = provider.api_key.as_ref().map(Secret::expose);
        all.extend(provider_secrets(
            key,
            provider.headers.values(),
            provider.base_url.as_deref().unwrap_or_default(),
        ));
        all.extend(from_env.cloned());
    }
    for var in super::KNOWN_PROVIDERS.iter().filter_map(|p| p.api_key_env) {
        all.extend(env.get(var).cloned());
    }
    let search = &config.search;
    all.extend(
        search
            .api_key_env
            .as_ref()
            .and_then(|var| env.get(var))
            .cloned(),
    );
    for url in [&search.base_url, &search.url].into_iter().flatten() {
        all.extend(provider_secrets(None, std::iter::empty(), url));
    }
    for server in config.mcp.values() {
        all.extend(server.secrets());
    }
    if let Some(url) = &config.cluster.nats {
        all.extend(provider_secrets(None, std::iter::empty(), url));
    }
    all.extend(config.store.secrets());
    all
}

/// Whether a key of a configuration table names a credential (`api_key`, `apiKey`,
/// `Authorization`, `x-api-key`, `access_token`, `password`, `client_secret`, …), judged by
/// its last word: `api_key_env` (a variable's name) and `max_tokens` are not.
pub fn is_secret_key(key: &str) -> bool {
    // Words split at `_`, `-`, `.`, spaces and lower-to-upper case changes.
    let mut words: Vec<String> = Vec::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_ascii_alphanumeric() {
            previous_lower = false;
            words.push(String::new());
            continue;
        }
        if (c.is_ascii_uppercase() && previous_lower) || words.is_empty() {
            words.push(String::new());
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        if let Some(word) = words.last_mut() {
            word.push(c.to_ascii_lowercase());
        }
    }
    words.retain(|w| !w.is_empty());
    let last = words.last().map(String::as_str);
    let before = words.len().checked_sub(2).and_then(|i| words.get(i));
    matches!(
        last,
        Some(
            "apikey" | "authorization" | "token" | "password" | "passwd" | "secret" | "credentials"
        )
    ) || (last == Some("key") && before.is_some_and(|w| w == "api"))
}

/// Replaces, anywhere in `value`, the text under a key that names a credential (see
/// [`is_secret_key`]) with [`REDACTED`]; for configuration shown to people, on top of
/// [`Config::redacted`] (agent `options` and other free-form tables may hold keys too).
pub fn redact_secret_fields(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if is_secret_key(key) && !field.is_object() && !field.is_array() && !field.is_null()
                {
                    *field = serde_json::Value::String(REDACTED.to_string());
                } else {
                    redact_secret_fields(field);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_secret_fields),
        _ => {}
    }
}

impl ProviderConfig {
    /// This provider as it may be shown: header values and URL credentials replaced (the key
    /// already shows as [`REDACTED`]).
    pub fn redacted(&self) -> ProviderConfig {
        let mut shown = self.clone();
        for value in shown.headers.values_mut() {
            *value = REDACTED.to_string();
        }
        if let Some(url) = &mut shown.base_url {
            *url = url_credentials(url).into_owned();
        }
        shown
    }
}

impl Config {
    /// This configuration as it may be shown: no provider or MCP server credential in it.
    pub fn redacted(&self) -> Config {
        let mut shown = self.clone();
        for provider in shown.provider.values_mut() {
            *provider = provider.redacted();
        }
        let search = &mut shown.search;
        for url in [&mut search.base_url, &mut search.url]
            .into_iter()
            .flatten()
        {
            *url = url_credentials(url).into_owned();
        }
        for server in shown.mcp.values_mut() {
            *server = server.redacted();
        }
        if let Some(url) = &mut shown.cluster.nats {
            *url = url_credentials(url).into_owned();
        }
        if let Some(url) = &mut shown.store.url {
            *url = super::store::redacted_url(url);
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_addresses_and_key_are_secrets() {
        let mut config = Config::default();
        config.search.engine = Some(super::super::SearchEngine::Searxng);
        config.search.url = Some("https://me:pw@search.example/".into());
        config.search.api_key_env = Some("SEARCH_KEY".into());
        let shown = config.redacted();
        assert_eq!(
            shown.search.url.as_deref(),
            Some("https://[redacted]@search.example/")
        );
        let env = BTreeMap::from([("SEARCH_KEY".to_string(), "k-42".to_string())]);
        let all = secrets(&config, &env);
        for secret in ["k-42", "me", "pw"] {
            assert!(all.iter().any(|s| s == secret), "{secret} in {all:?}");
        }
    }

    #[test]
    fn url_credentials_are_replaced_wherever_they_appear() {
        assert_eq!(
            url_credentials("https://user:pa55@host.example/v1"),
            "https://[redacted]@host.example/v1"
        );
        assert_eq!(
            url_credentials("error sending request for url (http://tok@10.0.0.1:9/x): refused"),
            "error sending request for url (http://[redacted]@10.0.0.1:9/x): refused"
        );
        assert_eq!(
            url_credentials("a http://a:b@h b \"https://c:d@e?x=1\" f"),
            "a http://[redacted]@h b \"https://[redacted]@e?x=1\" f"
        );
        for plain in [
            "https://host.example/v1?mail=a@b",
            "mail me at a@b.example",
            "http://localhost:4096",
            "no url",
        ] {
            assert_eq!(url_credentials(plain), plain);
        }
    }

    #[test]
    fn a_provider_redactor_hides_its_key_headers_and_url_credentials() {
        let headers = vec!["Bearer tok-123456".to_string(), "custom-value".to_string()];
        let redactor = Redactor::for_provider(
            Some("sk-live-abcdef"),
            &headers,
            "https://alice:pa55word@proxy.example/v1",
        );
        let text = "key sk-live-abcdef, auth Bearer tok-123456, token tok-123456, custom-value, \
                    user alice pass pa55word at https://alice:pa55word@proxy.example/v1";
        let shown = redactor.redact(text);
        for secret in [
            "sk-live-abcdef",
            "tok-123456",
            "custom-value",
            "pa55word",
            "alice",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("https://[redacted]@proxy.example/v1"),
            "{shown}"
        );
        assert_eq!(redactor.redact("nothing secret"), "nothing secret");
    }

    #[test]
    fn fields_named_like_credentials_are_redacted_at_any_depth() {
        let mut value = serde_json::json!({
            "model": "openai/gpt-4o",
            "max_tokens": 5,
            "agent": {"build": {"options": {"apiKey": "sk-1", "temperature": 0.2}}},
            "headers": {"Authorization": "Bearer x", "X-Api-Key": "k", "Accept": "json"},
            "list": [{"password": "p", "user": "u"}],
            "api_key_env": "OPENAI_API_KEY",
        });
        redact_secret_fields(&mut value);
        assert_eq!(value["agent"]["build"]["options"]["apiKey"], REDACTED);
        assert_eq!(value["agent"]["build"]["options"]["temperature"], 0.2);
        assert_eq!(value["headers"]["Authorization"], REDACTED);
        assert_eq!(value["headers"]["X-Api-Key"], REDACTED);
        assert_eq!(value["headers"]["Accept"], "json");
        assert_eq!(value["list"][0]["password"], REDACTED);
        assert_eq!(value["list"][0]["user"], "u");
        assert_eq!(value["model"], "openai/gpt-4o");
        assert_eq!(value["max_tokens"], 5);
        // The name of the variable holding a key is no secret, nor a count of tokens.
        assert_eq!(value["api_key_env"], "OPENAI_API_KEY");
        for plain in ["max_tokens", "api_key_env", "keyboard", "key", "tokenizer"] {
            assert!(!is_secret_key(plain), "{plain}");
        }
        for secret in [
            "api_key",
            "API_KEY",
            "apiKey",
            "apikey",
            "x-api-key",
            "access_token",
        ] {
            assert!(is_secret_key(secret), "{secret}");
        }
    }

    #[test]
    fn very_short_values_are_not_searched_for() {
        let redactor = Redactor::new(["1", "on", "sk-long-secret"]);
        assert_eq!(redactor.redact("1 on sk-long-secret"), "1 on [redacted]");
    }
}
