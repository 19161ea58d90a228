//! The web tools: `webfetch` (one page, as markdown, text or HTML, or an image), and
//! `websearch` / `codesearch` over the configured search backend (`[search]`: an Exa-compatible
//! endpoint or a SearXNG instance).

mod address;
mod exa;
mod fetch;
mod html;
mod search;
mod searxng;
#[cfg(test)]
mod tests;

pub use address::webfetch_pattern;
pub use fetch::WebFetchTool;
pub use search::{CodeSearchTool, SearchBackend, WebSearchTool};

use std::time::Duration;

use serde_json::{Map, Value};

use super::{ToolContext, ToolError};
use crate::permission::PermissionAsk;

/// The User-Agent of taskforce's web requests: who is asking, and where to read about it.
pub(crate) const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (compatible; taskforce/",
    env!("CARGO_PKG_VERSION"),
    "; +https://github.com/taskforce-rs/taskforce)"
);

/// Asks for `permission` on the one `pattern` (an "always" reply approves every pattern, as
/// OpenCode's web tools do), with `metadata` shown to the person asked.
async fn ask(
    ctx: &ToolContext,
    permission: &str,
    pattern: &str,
    metadata: Map<String, Value>,
) -> Result<(), ToolError> {
    ctx.ask(PermissionAsk {
        permission: permission.into(),
        patterns: vec![pattern.to_string()],
        always: vec!["*".into()],
        force_ask: false,
        metadata,
    })
    .await
}

/// An HTTP client that follows no redirects by itself (webfetch checks each hop); callers
/// bound the whole exchange with [`within`].
fn client() -> Result<reqwest::Client, ToolError> {
    reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ToolError::Failed(format!("cannot make an HTTP client: {e}")))
}

/// Runs `work`, failing with `timed_out` when it takes longer than `limit`.
async fn within<T>(
    limit: Duration,
    timed_out: impl FnOnce() -> String,
    work: impl std::future::Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| Err(ToolError::Failed(timed_out())))
}

/// Reads `response`'s body, failing with `too_large` once it passes `max` bytes (announced or
/// received).
async fn read_capped(
    mut response: reqwest::Response,
    max: usize,
    too_large: &str,
) -> Result<Vec<u8>, ToolError> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX))
    {
        return Err(ToolError::Failed(too_large.to_string()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ToolError::Failed(format!("reading the response failed: {e}")))?
    {
        if body.len() + chunk.len() > max {
            return Err(ToolError::Failed(too_large.to_string()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `text` cut to at most `max` characters.
fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
