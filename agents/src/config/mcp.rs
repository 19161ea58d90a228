//! `[mcp.NAME]`: the MCP servers whose tools agents may call, in OpenCode's shape, so that an
//! OpenCode user's `mcp` section works as written.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ConfigError;

/// How long connecting to a server and listing its tools may take when `timeout` is not set,
/// in milliseconds (OpenCode's default).
pub const DEFAULT_MCP_CONNECT_TIMEOUT_MS: u64 = 5_000;

/// How long one tool call may take when neither the server's `timeout` nor
/// `experimental.mcp_timeout` is set, in milliseconds (the MCP SDKs' request default).
pub const DEFAULT_MCP_CALL_TIMEOUT_MS: u64 = 60_000;

/// The tool id a model calls server `server`'s tool `tool` by: both names with every
/// character but ASCII letters, digits, `_` and `-` replaced by `_`, joined by `_`
/// (OpenCode's naming, so permission rules such as `"github_*"` carry over).
pub fn mcp_tool_id(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{}_{}", clean(server), clean(tool))
}

/// The prefix of every tool id of server `server` (`SERVER_`): what permission rules such as
/// `"SERVER_*"` match.
pub fn mcp_tool_prefix(server: &str) -> String {
    mcp_tool_id(server, "")
}

/// How taskforce reaches an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum McpKind {
    /// A program started by taskforce, spoken to on its standard input and output.
    Local,
    /// A server at a URL, spoken to over streamable HTTP (with the older HTTP+SSE transport as
    /// a fallback).
    Remote,
}

/// One MCP server. A layer may hold `enabled` alone, to switch off a server another layer
/// configures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// `local` or `remote`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<McpKind>,
    /// A local server's program and its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Environment variables set for a local server (over taskforce's own).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub environment: IndexMap<String, String>,
    /// A remote server's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request to a remote server.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub headers: IndexMap<String, String>,
    /// Whether the server is started with the runtime (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Milliseconds allowed for connecting and listing tools (5,000 when left out) and for
    /// each tool call (`experimental.mcp_timeout`, else 60,000, when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// OpenCode's OAuth settings of a remote server: accepted and not used (taskforce does not
    /// sign in to MCP servers; send a token in `headers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub oauth: Option<Value>,
}

impl McpConfig {
    /// Whether the server is started with the runtime.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }

    /// How long connecting and listing tools may take, in milliseconds.
    pub fn connect_timeout_ms(&self) -> u64 {
        self.timeout.unwrap_or(DEFAULT_MCP_CONNECT_TIMEOUT_MS)
    }

    /// How long one tool call may take, in milliseconds, given `experimental.mcp_timeout`.
    pub fn call_timeout_ms(&self, default: Option<u64>) -> u64 {
        self.timeout
            .or(default)
            .unwrap_or(DEFAULT_MCP_CALL_TIMEOUT_MS)
    }

    /// This server as it may be shown: header values, secret-looking environment values and
    /// URL credentials replaced.
    pub fn redacted(&self) -> McpConfig {
        let mut shown = self.clone();
        for value in shown.headers.values_mut() {
            *value = super::redact::REDACTED.to_string();
        }
        for (key, value) in shown.environment.iter_mut() {
            if super::redact::is_secret_key(key) {
                *value = super::redact::REDACTED.to_string();
            }
        }
        if let Some(url) = &mut shown.url {
            *url = super::redact::url_credentials(url).into_owned();
        }
        shown
    }

    /// The credentials this server's configuration holds: header values, secret-looking
    /// environment values, URL credentials.
    pub fn secrets(&self) -> Vec<String> {
        let mut all: Vec<String> = self.headers.values().cloned().collect();
        all.extend(
            self.environment
                .iter()
                .filter(|(key, _)| super::redact::is_secret_key(key))
                .map(|(_, value)| value.clone()),
        );
        if let Some(info) = self.url.as_deref().and_then(super::redact::url_user_info) {
            all.extend(info.split(':').map(str::to_string));
        }
        all
    }

    /// Checks a server as the merged configuration has it; the error names the key.
    pub fn check(&self, name: &str) -> Result<(), ConfigError> {
        check(name, self).map_err(|(key, message)| ConfigError::Invalid {
            origin: "configuration".into(),
            key: format!("mcp.{name}{key}"),
            message,
        })
    }
}

/// What is wrong with server `name`: the key under it (`.command`, or empty for the server
/// itself) and the message.
fn check(name: &str, server: &McpConfig) -> Result<(), (String, String)> {
    if name.trim().is_empty() {
        return Err((String::new(), "a server needs a name".into()));
    }
    if server.timeout == Some(0) {
        return Err((
            ".timeout".into(),
            "must be at least 1 (milliseconds)".into(),
        ));
    }
    let Some(kind) = server.kind else {
        if server.is_enabled() {
            return Err((
                ".type".into(),
                "missing; expected \"local\" (with `command`) or \"remote\" (with `url`)".into(),
            ));
        }
        return Ok(());
    };
    match kind {
        McpKind::Local => {
            match server.command.first() {
                None => {
                    return Err((
                        ".command".into(),
                        "a local server needs its program and arguments, as [\"npx\", \"-y\", \"my-mcp\"]".into(),
                    ));
                }
                Some(program) if program.trim().is_empty() => {
                    return Err((".command".into(), "the program name is empty".into()));
                }
                Some(_) => {}
            }
            for (key, other) in [
                ("url", server.url.is_some()),
                ("headers", !server.headers.is_empty()),
            ] {
                if other {
                    return Err((
                        format!(".{key}"),
                        format!("only a remote server has `{key}`; this one is \"local\""),
                    ));
                }
            }
        }
        McpKind::Remote => {
            let Some(url) = &server.url else {
                return Err((
                    ".url".into(),
                    "a remote server needs its URL, as \"https://example.com/mcp\"".into(),
                ));
            };
            match reqwest::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                Ok(u) => {
                    return Err((
                        ".url".into(),
                        format!("the scheme \"{}\" is not http or https", u.scheme()),
                    ));
                }
                Err(e) => return Err((".url".into(), format!("not a URL ({e})"))),
            }
            for (key, value) in &server.headers {
                check_header(key, value).map_err(|message| (format!(".headers.{key}"), message))?;
            }
            for (key, other) in [
                ("command", !server.command.is_empty()),
                ("environment", !server.environment.is_empty()),
            ] {
                if other {
                    return Err((
                        format!(".{key}"),
                        format!("only a local server has `{key}`; this one is \"remote\""),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Whether a header can be sent as written, and is not one the MCP transport sets itself.
fn check_header(name: &str, value: &str) -> Result<(), String> {
    use reqwest::header::{HeaderName, HeaderValue};
    let parsed = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| "not a valid HTTP header name".to_string())?;
    if matches!(
        parsed.as_str(),
        "accept" | "mcp-session-id" | "last-event-id" | "content-type" | "content-length"
    ) {
        return Err("set by the MCP transport itself; leave it out".into());
    }
    HeaderValue::from_str(value)
        .map(|_| ())
        .map_err(|_| "the value is not a valid HTTP header value".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(command: &[&str]) -> McpConfig {
        McpConfig {
            kind: Some(McpKind::Local),
            command: command.iter().map(|s| s.to_string()).collect(),
            ..McpConfig::default()
        }
    }

    #[test]
    fn ids_are_the_sanitized_server_and_tool_names() {
        assert_eq!(mcp_tool_id("github", "create_issue"), "github_create_issue");
        assert_eq!(mcp_tool_id("my.server", "do it!"), "my_server_do_it_");
        assert_eq!(mcp_tool_id("a-b", "c-d"), "a-b_c-d");
        assert_eq!(mcp_tool_id("café", "x"), "caf__x");
    }

    #[test]
    fn a_server_switched_off_needs_no_type() {
        let off = McpConfig {
            enabled: Some(false),
            ..McpConfig::default()
        };
        assert!(off.check("x").is_ok());
        let err = McpConfig::default().check("x").unwrap_err().to_string();
        assert!(err.contains("key `mcp.x.type`: missing"), "{err}");
    }

    #[test]
    fn each_kind_needs_its_own_keys_and_no_other() {
        assert!(local(&["npx", "-y", "srv"]).check("a").is_ok());
        let err = local(&[]).check("a").unwrap_err().to_string();
        assert!(err.contains("`mcp.a.command`"), "{err}");
        let mut both = local(&["srv"]);
        both.url = Some("http://x".into());
        let err = both.check("a").unwrap_err().to_string();
        assert!(err.contains("`mcp.a.url`: only a remote server"), "{err}");
        let remote = McpConfig {
            kind: Some(McpKind::Remote),
            url: Some("ftp://x".into()),
            ..McpConfig::default()
        };
        let err = remote.check("r").unwrap_err().to_string();
        assert!(err.contains("`mcp.r.url`: the scheme \"ftp\""), "{err}");
        let mut remote = McpConfig {
            url: Some("https://x/mcp".into()),
            ..remote
        };
        remote.headers.insert("Bad Name".into(), "v".into());
        let err = remote.check("r").unwrap_err().to_string();
        assert!(err.contains("`mcp.r.headers.Bad Name`"), "{err}");
    }

    #[test]
    fn timeouts_fall_back_to_opencodes_defaults() {
        let mut server = local(&["srv"]);
        assert_eq!(server.connect_timeout_ms(), 5_000);
        assert_eq!(server.call_timeout_ms(None), 60_000);
        assert_eq!(server.call_timeout_ms(Some(9)), 9);
        server.timeout = Some(250);
        assert_eq!(server.connect_timeout_ms(), 250);
        assert_eq!(server.call_timeout_ms(Some(9)), 250);
        server.timeout = Some(0);
        assert!(server.check("s").is_err());
    }

    #[test]
    fn secrets_are_hidden_when_shown() {
        let mut server = McpConfig {
            kind: Some(McpKind::Remote),
            url: Some("https://u:pw@host/mcp".into()),
            ..McpConfig::default()
        };
        server
            .headers
            .insert("Authorization".into(), "Bearer tok".into());
        let shown = server.redacted();
        assert_eq!(shown.headers["Authorization"], "[redacted]");
        assert_eq!(shown.url.as_deref(), Some("https://[redacted]@host/mcp"));
        assert!(server.secrets().contains(&"Bearer tok".to_string()));
        let mut local = local(&["srv"]);
        local
            .environment
            .insert("GITHUB_TOKEN".into(), "ghp_x".into());
        local.environment.insert("MODE".into(), "fast".into());
        let shown = local.redacted();
        assert_eq!(shown.environment["GITHUB_TOKEN"], "[redacted]");
        assert_eq!(shown.environment["MODE"], "fast");
        assert_eq!(local.secrets(), vec!["ghp_x".to_string()]);
    }
}
