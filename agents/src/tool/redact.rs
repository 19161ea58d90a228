//! Secret redaction for text leaving a child session: API keys of common providers (OpenAI,
//! Anthropic, Google, Groq, xAI, Hugging Face, Stripe), `Authorization` values, AWS keys,
//! GitHub, GitLab, Slack and npm tokens, secret-looking `export` lines and credentials inside
//! URLs become [`REDACTED`]; the home directory becomes `~`.
//!
//! Patterns are deliberately specific (a known prefix, a minimum length, a key name) so that
//! ordinary prose, code and paths pass unchanged.

use std::borrow::Cow;
use std::path::Path;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex, RegexSet};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// One pattern: the regex and how a match is rewritten.
struct Pattern {
    regex: Regex,
    rewrite: fn(&Captures<'_>) -> String,
}

fn pattern(re: &str, rewrite: fn(&Captures<'_>) -> String) -> Pattern {
    Pattern {
        // The patterns are constants, tested below; a typo fails every test at once.
        regex: Regex::new(re).unwrap_or_else(|e| panic!("bad redaction pattern {re}: {e}")),
        rewrite,
    }
}

/// The whole match is the secret.
fn whole(_: &Captures<'_>) -> String {
    REDACTED.to_string()
}

/// Group 1 is a prefix to keep; the rest is the secret.
fn keep_prefix(c: &Captures<'_>) -> String {
    format!("{}{REDACTED}", &c[1])
}

/// A key-like token: it must mix letters and digits (keys do; hyphenated words do not).
fn token_if_mixed(c: &Captures<'_>) -> String {
    let token = &c[0];
    let digits = token.chars().any(|ch| ch.is_ascii_digit());
    let letters = token.chars().any(|ch| ch.is_ascii_alphabetic());
    if digits && letters {
        REDACTED.to_string()
    } else {
        token.to_string()
    }
}

static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        // `Authorization: Bearer …` / `Basic …` / `token …` (headers, curl -H, JSON).
        pattern(
            r#"(?i)(\bauthorization["']?\s*[:=]\s*["']?(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]+"#,
            keep_prefix,
        ),
        // A bare bearer token of some length.
        pattern(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{16,}=*", keep_prefix),
        // `export NAME=value` (also after a `$ ` prompt) where NAME ends a segment with KEY,
        // TOKEN, SECRET or PASSWORD, or has a segment PASS, AUTH or CREDENTIALS.
        pattern(
            r"(?im)^(\s*(?:\$\s*)?export\s+(?:[A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)|(?:[A-Za-z0-9_]*_)?(?:PASS|AUTH|CREDENTIALS?))(?:_[A-Za-z0-9_]*)?\s*=\s*)\S.*$",
            keep_prefix,
        ),
        // `aws_secret_access_key = …` (credentials files, env dumps).
        pattern(
            r#"(?i)(\baws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{20,}"#,
            keep_prefix,
        ),
        // Credentials inside URLs: keep the scheme and user, hide the password.
        pattern(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:)[^\s/@]+@", |c| {
            format!("{}{REDACTED}@", &c[1])
        }),
        // Anthropic before OpenAI: both start with `sk-`.
        pattern(r"\bsk-ant-[A-Za-z0-9_-]{20,}", whole),
        pattern(
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
            token_if_mixed,
        ),
        // Google API keys.
        pattern(r"\bAIza[0-9A-Za-z_-]{35}", whole),
        // AWS access key ids.
        pattern(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", whole),
        // GitHub tokens.
        pattern(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}", whole),
        pattern(r"\bgithub_pat_[A-Za-z0-9_]{20,}", whole),
        // GitLab personal access tokens.
        pattern(r"\bglpat-[A-Za-z0-9_-]{20,}", whole),
        // Slack bot, user, app and refresh tokens.
        pattern(r"\bxox[abposre]-[A-Za-z0-9-]{10,}", whole),
        // Stripe secret and restricted keys (publishable `pk_` keys are public).
        pattern(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", whole),
        // Hugging Face, npm, Groq and xAI tokens.
        pattern(r"\bhf_[A-Za-z0-9]{30,}", token_if_mixed),
        pattern(r"\bnpm_[A-Za-z0-9]{36,}", token_if_mixed),
        pattern(r"\bgsk_[A-Za-z0-9]{40,}", token_if_mixed),
        pattern(r"\bxai-[A-Za-z0-9]{40,}", token_if_mixed),
    ]
});

/// Every pattern at once: text that matches none (most of it) is scanned once, not per pattern.
static ANY: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(PATTERNS.iter().map(|p| p.regex.as_str()))
        .unwrap_or_else(|e| panic!("bad redaction patterns: {e}"))
});

/// A literal every pattern's match contains (case aside): text without any of them cannot hold
/// a secret, and a literal scan is far cheaper than the patterns.
static CLUES: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build([
            "authorization",
            "bearer",
            "export",
            "aws_secret_access_key",
            "://",
            "sk-",
            "aiza",
            "akia",
            "asia",
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
            "xox",
            "_live_",
            "_test_",
            "hf_",
            "npm_",
            "gsk_",
            "xai-",
        ])
        .unwrap_or_else(|e| panic!("bad redaction clues: {e}"))
});

/// The shortest text any pattern can match.
const MIN_SECRET_TEXT: usize = 8;

/// `text` with secrets replaced by [`REDACTED`] and `home` (when given) shortened to `~`.
pub fn redact(text: &str, home: Option<&Path>) -> String {
    let mut out = text.to_string();
    redact_in_place(&mut out, home);
    out
}

/// [`redact`] on `text` itself: a text with nothing to redact is left as it is, uncopied.
pub fn redact_in_place(text: &mut String, home: Option<&Path>) {
    if may_hold_secret(text) {
        redact_patterns(text);
    }
    if let Some(home) = home_in(text, home) {
        *text = shorten_home(text, home);
    }
}

/// Redacts the titles of a child's summarized tool calls (a bash call's title is its command).
pub fn redact_titles(items: &mut [crate::model::SummaryItem], home: Option<&Path>) {
    for title in items.iter_mut().filter_map(|i| i.state.title.as_mut()) {
        redact_in_place(title, home);
    }
}

/// Whether [`redact`] may change `text` (false: it would give `text` back as it is).
pub fn would_redact(text: &str, home: Option<&Path>) -> bool {
    (may_hold_secret(text) && ANY.is_match(text)) || home_in(text, home).is_some()
}

/// Whether `text` has a clue of some secret pattern. No pattern matches fewer than 8
/// characters (`a://b:c@` is the shortest).
fn may_hold_secret(text: &str) -> bool {
    text.len() >= MIN_SECRET_TEXT && CLUES.is_match(text)
}

/// The home directory, when `text` contains it.
fn home_in<'h>(text: &str, home: Option<&'h Path>) -> Option<&'h str> {
    let home = home?;
    // Shorter than the path less a trailing slash: it cannot hold it (known before the path is
    // read as text, which validates it).
    if text.len() + 1 < home.as_os_str().len() {
        return None;
    }
    let home = home.to_str()?;
    let bare = home.trim_end_matches('/');
    // Exactly: no searcher is built for a text shorter than the bare path.
    (!bare.is_empty() && text.len() >= bare.len() && text.contains(bare)).then_some(home)
}

/// Applies every pattern that matches `out`.
fn redact_patterns(out: &mut String) {
    let matched = ANY.matches(out);
    for (i, p) in PATTERNS.iter().enumerate() {
        if !matched.matched(i) {
            continue;
        }
        if let Cow::Owned(changed) = p.regex.replace_all(out, |c: &Captures<'_>| (p.rewrite)(c)) {
            *out = changed;
        }
    }
}

/// Replaces `home` with `~` where it is a whole path prefix (not `/home/al` in `/home/alice`).
fn shorten_home(text: &str, home: &str) -> String {
    let home = home.trim_end_matches('/');
    if home.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(home) {
        let after = &rest[at + home.len()..];
        let whole = after
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')));
        out.push_str(&rest[..at]);
        out.push_str(if whole { "~" } else { home });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(text: &str) -> String {
        redact(text, None)
    }

    #[test]
    fn openai_keys() {
        let key = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD";
        assert_eq!(r(&format!("key: {key}")), "key: [REDACTED]");
        let proj = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Q";
        assert_eq!(r(&format!("OPENAI={proj}.")), "OPENAI=[REDACTED].");
    }

    #[test]
    fn anthropic_keys() {
        let key = "sk-ant-api03-Xy9zAbCdEfGhIjKlMnOpQrStUvWx-0123456789";
        assert_eq!(r(&format!("use {key} here")), "use [REDACTED] here");
    }

    #[test]
    fn google_keys() {
        let key = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q";
        assert_eq!(key.len(), 39);
        assert_eq!(r(&format!("?key={key}&q=1")), "?key=[REDACTED]&q=1");
    }

    #[test]
    fn authorization_bearer_and_basic() {
        assert_eq!(
            r("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(
            r(r#"curl -H "authorization: Basic dXNlcjpwYXNzd29yZA==" x"#),
            r#"curl -H "authorization: Basic [REDACTED]" x"#
        );
        assert_eq!(
            r(r#"{"Authorization": "token abc123"}"#),
            r#"{"Authorization": "token [REDACTED]"}"#
        );
        assert_eq!(
            r("sent bearer 0123456789abcdefXYZ to it"),
            "sent bearer [REDACTED] to it"
        );
    }

    #[test]
    fn aws_keys() {
        assert_eq!(r("id AKIAIOSFODNN7EXAMPLE ok"), "id [REDACTED] ok");
        assert_eq!(r("id ASIAY34FZKBOKMUTVV7A"), "id [REDACTED]");
        assert_eq!(
            r("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "aws_secret_access_key = [REDACTED]"
        );
    }

    #[test]
    fn github_tokens() {
        for prefix in ["ghp", "gho", "ghu", "ghs", "ghr"] {
            let token = format!("{prefix}_16C7e42F292c6912E7710c838347Ae178B4a");
            assert_eq!(r(&format!("t={token}")), "t=[REDACTED]", "{prefix}");
        }
        assert_eq!(
            r("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
            "[REDACTED]"
        );
    }

    #[test]
    fn secret_export_lines() {
        let text = "export OPENAI_API_KEY=abc\nexport DB_PASSWORD='hunter2'\nexport GITHUB_TOKEN=\"x y\"\nexport MY_SECRET_VALUE=1\nexport PATH=/usr/bin:$PATH\n";
        assert_eq!(
            r(text),
            "export OPENAI_API_KEY=[REDACTED]\nexport DB_PASSWORD=[REDACTED]\nexport GITHUB_TOKEN=[REDACTED]\nexport MY_SECRET_VALUE=[REDACTED]\nexport PATH=/usr/bin:$PATH\n"
        );
        assert_eq!(r("export KEYBOARD=us"), "export KEYBOARD=us");
    }

    #[test]
    fn other_services_tokens() {
        for token in [
            "glpat-xxxxXXXX1234yyyyZZZZ",
            "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
            "xoxp-1234567890-abcdefABCDEF",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "rk_test_51H8abcDEF123ghiJKL456",
            "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIj",
            "xai-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIj",
        ] {
            assert_eq!(
                r(&format!("token {token} end")),
                "token [REDACTED] end",
                "{token}"
            );
        }
        // Public keys and look-alike names stay.
        for text in [
            "pk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "hf_hub_download is a function",
            "npm_config_registry",
            "the xoxo-gossip tag",
        ] {
            assert_eq!(r(text), text);
        }
    }

    #[test]
    fn export_lines_after_a_prompt_and_with_more_secret_names() {
        let text = "$ export TOKEN=abc123\n  $export DB_PASS=hunter2\nexport AUTH_HEADER='Bearer x'\nexport GOOGLE_APPLICATION_CREDENTIALS=/k.json\nexport COMPASS=north\nexport NEXTAUTH_URL=http://localhost\n";
        assert_eq!(
            r(text),
            "$ export TOKEN=[REDACTED]\n  $export DB_PASS=[REDACTED]\nexport AUTH_HEADER=[REDACTED]\nexport GOOGLE_APPLICATION_CREDENTIALS=[REDACTED]\nexport COMPASS=north\nexport NEXTAUTH_URL=http://localhost\n"
        );
    }

    #[test]
    fn summary_titles() {
        use crate::model::{SummaryItem, SummaryState, ToolStatus};
        let mut items = vec![SummaryItem {
            id: "prt_1".into(),
            tool: "bash".into(),
            state: SummaryState {
                status: ToolStatus::Completed,
                title: Some("curl -H 'Authorization: Bearer abc123' /home/al/x".into()),
            },
        }];
        redact_titles(&mut items, Some(Path::new("/home/al")));
        assert_eq!(
            items[0].state.title.as_deref(),
            Some("curl -H 'Authorization: Bearer [REDACTED]' ~/x")
        );
    }

    #[test]
    fn url_credentials() {
        assert_eq!(
            r("postgres://admin:hunter2@db.local:5432/app"),
            "postgres://admin:[REDACTED]@db.local:5432/app"
        );
        assert_eq!(
            r("clone https://user:ghp_tok@github.com/o/r.git"),
            "clone https://user:[REDACTED]@github.com/o/r.git"
        );
        // The shortest text a pattern matches is still redacted.
        assert_eq!(r("a://b:c@"), "a://b:[REDACTED]@");
    }

    #[test]
    fn home_is_shortened_to_a_tilde() {
        let home = Path::new("/home/alice");
        assert_eq!(
            redact("see /home/alice/src/main.rs and /home/alice", Some(home)),
            "see ~/src/main.rs and ~"
        );
        assert_eq!(
            redact("/home/alice2/x /home/alice.bak", Some(home)),
            "/home/alice2/x /home/alice.bak"
        );
        assert_eq!(
            redact("/home/alice/x", Some(Path::new("/home/alice/"))),
            "~/x"
        );
    }

    #[test]
    fn ordinary_text_passes_unchanged() {
        let text = "\
The task-runner reads sk-learn-is-a-python-library-name notes.\n\
Use the bearer of good news; Authorization is handled in src/auth.rs.\n\
https://example.com/path:with@colon and mailto:someone@example.com\n\
const MAX_KEY = 10; export default function token() {}\n\
AKIA is a prefix, AIza too; ghp_short; github_pat_ is a prefix.\n\
Basic arithmetic: 2 + 2 = 4. aws_secret_access_key is documented in docs/aws.md.\n\
fn main() { let password = read_password(); }\n";
        assert_eq!(r(text), text);
    }
}
