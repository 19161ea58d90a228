//! A SearXNG instance's JSON API: `GET <url>/search?q=…&format=json`, its results written
//! out as `Title:` / `URL:` / `Text:` blocks (the layout of Exa's answers). Code searches ask
//! the `it` category (code hosts, Q&A sites, package and documentation engines).

use std::time::Duration;

use reqwest::Url;
use reqwest::header::ACCEPT;
use serde::Deserialize;
use serde_json::Value;

use super::search::{DEFAULT_NUM_RESULTS, WebArgs};
use super::{client, cut_chars, read_capped, within};
use crate::tool::ToolError;

/// How long a search may take.
const TIMEOUT: Duration = Duration::from_secs(25);

/// Characters of results a web search returns when the call names no limit.
const DEFAULT_CHARACTERS: u64 = 10_000;

/// Results a code search returns.
const CODE_RESULTS: u64 = 10;

/// Characters per token, to turn a code search's token budget into a length.
const CHARS_PER_TOKEN: u64 = 4;

/// The most bytes of an answer read.
const MAX_ANSWER: usize = 5 * 1024 * 1024;

/// The parts of SearXNG's answer that are written out.
#[derive(Debug, Default, Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Hit>,
    #[serde(default)]
    answers: Vec<Value>,
}

/// One result.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Hit {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    published_date: Option<String>,
}

/// A web search: the results as text, `None` when there are none.
pub(super) async fn web(url: &str, args: &WebArgs) -> Result<Option<String>, ToolError> {
    let count = args
        .num_results
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_NUM_RESULTS);
    let chars = args.context_max_characters.unwrap_or(DEFAULT_CHARACTERS);
    search(url, &args.query, "general", count, chars).await
}

/// A code search of about `tokens` tokens: the results as text, `None` when there are none.
pub(super) async fn code(url: &str, query: &str, tokens: u64) -> Result<Option<String>, ToolError> {
    search(url, query, "it", CODE_RESULTS, tokens * CHARS_PER_TOKEN).await
}

/// Searches `category` for `query`; at most `count` results and `chars` characters.
async fn search(
    base: &str,
    query: &str,
    category: &str,
    count: u64,
    chars: u64,
) -> Result<Option<String>, ToolError> {
    let endpoint = endpoint(base).map_err(ToolError::Failed)?;
    let answer = within(
        TIMEOUT,
        || "Search request timed out".into(),
        fetch(endpoint, query, category),
    )
    .await?;
    let text = render(&answer, usize::try_from(count).unwrap_or(usize::MAX));
    let max = usize::try_from(chars).unwrap_or(usize::MAX);
    Ok((!text.is_empty()).then(|| cut_chars(&text, max).to_string()))
}

/// `<base>/search`, keeping a path the instance is served under.
fn endpoint(base: &str) -> Result<Url, String> {
    let mut url = Url::parse(base).map_err(|e| format!("search.url {base:?} is not a URL: {e}"))?;
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url.join("search")
        .map_err(|e| format!("search.url {base:?}: {e}"))
}

async fn fetch(endpoint: Url, query: &str, category: &str) -> Result<Answer, ToolError> {
    let shown = endpoint.clone();
    let response = client()?
        .get(endpoint)
        .header(ACCEPT, "application/json")
        .query(&[
            ("q", query),
            ("format", "json"),
            ("categories", category),
            ("pageno", "1"),
        ])
        .send()
        .await
        .map_err(|e| ToolError::Failed(format!("Search error: {}", e.without_url())))?;
    let status = response.status();
    let bytes = read_capped(
        response,
        MAX_ANSWER,
        "Search error: the answer is larger than 5MB",
    )
    .await?;
    if status.as_u16() == 403 {
        return Err(ToolError::Failed(format!(
            "Search error (403): the SearXNG instance at {shown} refuses JSON; add `json` to `search.formats` in its settings.yml"
        )));
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        return Err(ToolError::Failed(format!(
            "Search error ({}): {}",
            status.as_u16(),
            cut_chars(text.trim(), 2000)
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ToolError::Failed(format!(
            "Search error: the SearXNG instance at {shown} did not answer JSON ({e})"
        ))
    })
}

/// Direct answers first, then up to `count` results, as text blocks.
fn render(answer: &Answer, count: usize) -> String {
    let mut blocks: Vec<String> = answer
        .answers
        .iter()
        .filter_map(|a| match a {
            Value::String(s) => Some(s.clone()),
            other => other["answer"].as_str().map(str::to_string),
        })
        .filter(|a| !a.trim().is_empty())
        .map(|a| format!("Answer: {}", a.trim()))
        .collect();
    for hit in answer
        .results
        .iter()
        .filter(|h| h.url.is_some())
        .take(count)
    {
        let mut block = String::new();
        let field = |block: &mut String, name: &str, value: &Option<String>| {
            if let Some(v) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
                block.push_str(&format!("{name}: {v}\n"));
            }
        };
        field(&mut block, "Title", &hit.title);
        field(&mut block, "URL", &hit.url);
        field(&mut block, "Published Date", &hit.published_date);
        field(&mut block, "Text", &hit.content);
        blocks.push(block.trim_end().to_string());
    }
    blocks.join("\n\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_endpoint_keeps_the_instance_path() {
        assert_eq!(
            endpoint("http://127.0.0.1:8888").unwrap().as_str(),
            "http://127.0.0.1:8888/search"
        );
        assert_eq!(
            endpoint("https://x.org/searx").unwrap().as_str(),
            "https://x.org/searx/search"
        );
        assert!(endpoint("not a url").is_err());
    }

    #[test]
    fn results_are_written_as_blocks_and_cut_to_the_count() {
        let answer: Answer = serde_json::from_value(json!({
            "query": "rust",
            "answers": ["Rust is a language"],
            "results": [
                {"title": "Rust", "url": "https://rust-lang.org/", "content": "A language", "publishedDate": null},
                {"title": "Crates", "url": "https://crates.io/", "content": "Packages", "publishedDate": "2026-01-02T00:00:00"},
                {"title": "Third", "url": "https://third.example/", "content": "more"}
            ]
        }))
        .unwrap();
        assert_eq!(
            render(&answer, 2),
            "Answer: Rust is a language\n\nTitle: Rust\nURL: https://rust-lang.org/\nText: A language\n\nTitle: Crates\nURL: https://crates.io/\nPublished Date: 2026-01-02T00:00:00\nText: Packages"
        );
        assert_eq!(render(&Answer::default(), 8), "");
    }
}
