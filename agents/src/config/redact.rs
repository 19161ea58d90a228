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
/// variable `api_key_env` names or a provider's default variable), header values and URL
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
    for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
        all.extend(env.get(var).cloned());
    }
    all
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
    /// This configuration as it may be shown: no provider credential in it.
    pub fn redacted(&self) -> Config {
        let mut shown = self.clone();
        for provider in shown.provider.values_mut() {
            *provider = provider.redacted();
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn very_short_values_are_not_searched_for() {
        let redactor = Redactor::new(["1", "on", "sk-long-secret"]);
        assert_eq!(redactor.redact("1 on sk-long-secret"), "1 on [redacted]");
    }
}
