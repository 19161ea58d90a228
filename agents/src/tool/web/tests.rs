//! The web tools over real HTTP to the test kit's fake web on 127.0.0.1.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use taskforce_testkit::fake_web::{FakeWeb, PNG};

use super::{CodeSearchTool, SearchBackend, WebFetchTool, WebSearchTool};
use crate::config::{SearchConfig, SearchEngine};
use crate::model::data_url::data_url;
use crate::permission::{Action, Rule};
use crate::tool::testing::Project;
use crate::tool::{Tool, ToolError, ToolOutput, run_tool};

async fn fetch(project: &Project, args: Value) -> Result<ToolOutput, ToolError> {
    run_tool(&WebFetchTool, args, &project.ctx()).await
}

async fn fetched(web: &FakeWeb, path: &str, format: &str) -> ToolOutput {
    let project = Project::new();
    fetch(&project, json!({"url": web.url(path), "format": format}))
        .await
        .unwrap()
}

async fn failed(web: &FakeWeb, path: &str) -> String {
    let project = Project::new();
    fetch(&project, json!({"url": web.url(path)}))
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn html_is_fetched_as_markdown_text_or_html() {
    let web = FakeWeb::start().await.unwrap();
    let md = fetched(&web, "/page.html", "markdown").await;
    assert!(md.output.contains("# Welcome"), "{}", md.output);
    assert!(md.output.contains("**bold**"), "{}", md.output);
    assert!(!md.output.contains("tracking"), "scripts are left out");
    assert_eq!(
        md.title,
        format!("{} (text/html; charset=utf-8)", web.url("/page.html"))
    );
    let text = fetched(&web, "/page.html", "text").await;
    assert!(
        text.output.contains("A page with bold text and a link."),
        "{}",
        text.output
    );
    assert!(!text.output.contains('<'), "{}", text.output);
    let html = fetched(&web, "/page.html", "html").await;
    assert!(
        html.output.starts_with("<!doctype html>"),
        "{}",
        html.output
    );

    // An honest user agent, and the Accept header of the format asked for.
    let requests = web.requests_to("/page.html");
    let agent = requests[0].header("user-agent").unwrap();
    assert!(agent.contains("taskforce/"), "{agent}");
    assert!(
        requests[0]
            .header("accept")
            .unwrap()
            .starts_with("text/markdown;q=1.0")
    );
    assert!(
        requests[1]
            .header("accept")
            .unwrap()
            .starts_with("text/plain;q=1.0")
    );
    assert!(
        requests[2]
            .header("accept")
            .unwrap()
            .starts_with("text/html;q=1.0")
    );
}

#[tokio::test]
async fn text_passes_through_whatever_the_format() {
    let web = FakeWeb::start().await.unwrap();
    for format in ["markdown", "text", "html"] {
        let out = fetched(&web, "/notes.txt", format).await;
        assert_eq!(out.output, "plain notes\nsecond line\n");
    }
    assert_eq!(
        fetched(&web, "/data.json", "markdown").await.output,
        r#"{"answer":42}"#
    );
}

#[tokio::test]
async fn five_redirects_are_followed_and_a_sixth_is_refused() {
    let web = FakeWeb::start().await.unwrap();
    let out = fetched(&web, "/redirect/5", "markdown").await;
    assert!(out.output.contains("# Welcome"), "{}", out.output);
    assert_eq!(
        failed(&web, "/redirect/6").await,
        "Too many redirects (more than 5)"
    );
}

#[tokio::test]
async fn each_redirect_is_asked_for_and_a_denied_target_is_not_fetched() {
    let web = FakeWeb::start().await.unwrap();
    let denied = format!("{}*", web.url("/notes"));
    let project = Project::with_rules(vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("webfetch", denied, Action::Deny),
    ]);
    // The redirect names the denied page in another spelling.
    let target = web
        .url("/NOTES.txt")
        .replace("http://", "HTTP://")
        .replace("/NOTES", "/%6Eotes");
    let start = format!("{}?url={}", web.url("/to"), target.replace('%', "%25"));
    let err = fetch(&project, json!({"url": start})).await.unwrap_err();
    assert!(matches!(err, ToolError::Permission(_)), "{err}");
    assert!(
        web.requests_to("/notes.txt").is_empty(),
        "the denied page was not fetched"
    );
    let asks = project.asks();
    assert_eq!(asks.len(), 2);
    assert_eq!(asks[1].patterns, [web.url("/notes.txt")]);
    assert_eq!(asks[1].metadata["redirectedFrom"], json!(start));
}

#[tokio::test]
async fn a_deny_rule_holds_for_every_spelling_of_the_address() {
    let web = FakeWeb::start().await.unwrap();
    let rule = format!("{}*", web.url("/page"));
    let project = Project::with_rules(vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("webfetch", rule, Action::Deny),
    ]);
    let plain = web.url("/page.html");
    for spelling in [
        plain.replace("http://", "HTTP://"),
        plain.replace("/page", "/x/../%70age"),
        plain.replace("http://", "http://user:pw@"),
    ] {
        let err = fetch(&project, json!({"url": spelling})).await.unwrap_err();
        assert!(matches!(err, ToolError::Permission(_)), "{spelling}: {err}");
    }
    assert!(web.requests().is_empty(), "nothing was fetched");
    assert!(project.asks().iter().all(|a| a.patterns == [plain.clone()]));
}

#[tokio::test]
async fn a_page_that_never_answers_times_out() {
    let web = FakeWeb::start().await.unwrap();
    let project = Project::new();
    let err = fetch(&project, json!({"url": web.url("/slow"), "timeout": 0.2}))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, "Request timed out after 0.2 seconds");
}

#[tokio::test]
async fn bodies_over_five_megabytes_are_refused_announced_or_not() {
    let web = FakeWeb::start().await.unwrap();
    for path in ["/huge", "/huge-declared"] {
        assert_eq!(
            failed(&web, path).await,
            "Response too large (exceeds 5MB limit)",
            "{path}"
        );
    }
}

#[tokio::test]
async fn binary_data_is_refused_and_images_come_as_attachments() {
    let web = FakeWeb::start().await.unwrap();
    let err = failed(&web, "/binary").await;
    assert!(
        err.contains("is not text (application/octet-stream)"),
        "{err}"
    );
    let image = fetched(&web, "/image.png", "markdown").await;
    assert_eq!(image.output, "Image fetched successfully");
    assert_eq!(image.attachments.len(), 1);
    assert_eq!(image.attachments[0].mime, "image/png");
    assert_eq!(image.attachments[0].url, data_url("image/png", PNG));
}

#[tokio::test]
async fn errors_name_the_status_and_the_scheme() {
    let web = FakeWeb::start().await.unwrap();
    assert_eq!(
        failed(&web, "/status/404").await,
        "Request failed with status code: 404"
    );
    let project = Project::new();
    let err = fetch(&project, json!({"url": "file:///etc/passwd"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "URL must start with http:// or https://");
    assert!(
        project.asks().is_empty(),
        "nothing is asked for a refused address"
    );
    let err = fetch(&project, json!({"url": web.url("/"), "format": "pdf"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
}

// ------------------------------------------------------------------------------ search

fn backend(config: Value, env: &[(&str, &str)]) -> Arc<SearchBackend> {
    let config: SearchConfig = serde_json::from_value(config).unwrap();
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Arc::new(SearchBackend::from_config(&config, &env).unwrap())
}

fn exa(web: &FakeWeb, env: &[(&str, &str)]) -> Arc<SearchBackend> {
    let config =
        json!({"engine": "exa", "base_url": web.url("/exa/mcp"), "api_key_env": "EXA_KEY"});
    backend(config, env)
}

fn searxng(web: &FakeWeb) -> Arc<SearchBackend> {
    backend(
        json!({"engine": "searxng", "url": web.url("/searxng")}),
        &[],
    )
}

async fn search(backend: &Arc<SearchBackend>, args: Value) -> Result<ToolOutput, ToolError> {
    let tool = WebSearchTool {
        backend: backend.clone(),
    };
    run_tool(&tool, args, &Project::new().ctx()).await
}

async fn code(backend: &Arc<SearchBackend>, args: Value) -> Result<ToolOutput, ToolError> {
    let tool = CodeSearchTool {
        backend: backend.clone(),
    };
    run_tool(&tool, args, &Project::new().ctx()).await
}

#[test]
fn no_engine_is_no_backend() {
    let config = SearchConfig::default();
    assert!(SearchBackend::from_config(&config, &BTreeMap::new()).is_none());
}

#[tokio::test]
async fn exa_is_called_as_opencode_calls_it() {
    let web = FakeWeb::start().await.unwrap();
    let exa = exa(&web, &[("EXA_KEY", "k-123")]);
    assert_eq!(exa.engine(), SearchEngine::Exa);
    let out = search(&exa, json!({"query": "rust actors", "numResults": 3}))
        .await
        .unwrap();
    assert_eq!(out.title, "Web search: rust actors");
    assert!(
        out.output.starts_with("Title: Result for rust actors"),
        "{}",
        out.output
    );
    let out = code(&exa, json!({"query": "tokio select"})).await.unwrap();
    assert_eq!(out.title, "Code search: tokio select");
    assert!(out.output.contains("(5000 tokens)"), "{}", out.output);

    let calls = web.requests_to("/exa/mcp");
    assert_eq!(calls[0].header("x-api-key"), Some("k-123"));
    assert_eq!(
        calls[0].header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(
        calls[0].body,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "web_search_exa",
            "arguments": {"query": "rust actors", "type": "auto", "numResults": 3, "livecrawl": "fallback"}
        }})
    );
    assert_eq!(
        calls[1].body["params"],
        json!({"name": "get_code_context_exa", "arguments": {"query": "tokio select", "tokensNum": 5000}})
    );
}

#[tokio::test]
async fn exa_failures_are_clear_errors_and_no_hits_say_so() {
    let web = FakeWeb::start().await.unwrap();
    let exa_ok = exa(&web, &[("EXA_KEY", "k")]);
    let out = search(&exa_ok, json!({"query": "nothing"})).await.unwrap();
    assert_eq!(
        out.output,
        "No search results found. Please try a different query."
    );
    let out = code(&exa_ok, json!({"query": "nothing"})).await.unwrap();
    assert!(
        out.output
            .starts_with("No code snippets or documentation found.")
    );
    let err = search(&exa_ok, json!({"query": "fail"})).await.unwrap_err();
    assert_eq!(err.to_string(), "Search error: search backend failed");

    let bad = exa(&web, &[("EXA_KEY", "bad-key")]);
    let err = search(&bad, json!({"query": "x"})).await.unwrap_err();
    assert_eq!(err.to_string(), "Search error (401): invalid API key");
    let err = code(&bad, json!({"query": "x"})).await.unwrap_err();
    assert_eq!(err.to_string(), "Code search error (401): invalid API key");

    let unset = exa(&web, &[]);
    let err = search(&unset, json!({"query": "x"})).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("EXA_KEY (named by search.api_key_env) is not set"),
        "{err}"
    );
    let err = code(&exa_ok, json!({"query": "x", "tokensNum": 10}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
}

#[tokio::test]
async fn searxng_answers_web_and_code_searches_through_its_json_api() {
    let web = FakeWeb::start().await.unwrap();
    let searx = searxng(&web);
    let out = search(&searx, json!({"query": "actix", "numResults": 2}))
        .await
        .unwrap();
    assert_eq!(
        out.output,
        "Title: actix result 1\nURL: https://web.example/1\nText: About actix, number 1.\n\nTitle: actix result 2\nURL: https://web.example/2\nText: About actix, number 2."
    );
    let out = search(
        &searx,
        json!({"query": "actix", "contextMaxCharacters": 21}),
    )
    .await
    .unwrap();
    assert_eq!(out.output, "Title: actix result 1");
    let out = code(&searx, json!({"query": "serde derive"}))
        .await
        .unwrap();
    assert!(
        out.output.contains("https://code.example/10"),
        "{}",
        out.output
    );
    assert!(
        !out.output.contains("https://code.example/11"),
        "ten results at most"
    );
    let out = search(&searx, json!({"query": "nothing"})).await.unwrap();
    assert_eq!(
        out.output,
        "No search results found. Please try a different query."
    );

    let calls = web.requests_to("/searxng/search");
    assert_eq!(calls[0].query["q"], "actix");
    assert_eq!(calls[0].query["format"], "json");
    assert_eq!(calls[0].query["categories"], "general");
    assert_eq!(calls[2].query["categories"], "it");
}

#[tokio::test]
async fn searches_ask_their_permission_with_the_query() {
    let web = FakeWeb::start().await.unwrap();
    let project = Project::with_rules(vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("websearch", "*secret*", Action::Deny),
    ]);
    let tool = WebSearchTool {
        backend: searxng(&web),
    };
    let err = run_tool(&tool, json!({"query": "my secret plan"}), &project.ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Permission(_)), "{err}");
    assert!(web.requests().is_empty());
    assert_eq!(project.asks()[0].permission, "websearch");
    assert_eq!(project.asks()[0].patterns, ["my secret plan"]);
    let description = tool.description(&project.ctx().agent, &project.registry);
    assert!(description.contains("SearXNG"), "{description}");
    assert!(!description.contains("{{year}}"), "{description}");
}
