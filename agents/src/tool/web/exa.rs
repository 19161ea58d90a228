//! Exa's search as OpenCode calls it: one JSON-RPC `tools/call` posted to Exa's MCP endpoint
//! (`web_search_exa`, `get_code_context_exa`), answered as JSON or as a server-sent event
//! stream whose `data:` lines carry the JSON-RPC response.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{Value, json};

use super::search::{DEFAULT_NUM_RESULTS, WebArgs};
use super::{client, read_capped, within};
use crate::tool::ToolError;

/// How long a web search may take (OpenCode's).
const WEB_TIMEOUT: Duration = Duration::from_secs(25);

/// How long a code search may take (OpenCode's).
const CODE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes of an answer read.
const MAX_ANSWER: usize = 5 * 1024 * 1024;

/// A web search: the text Exa returns, `None` when it found nothing.
pub(super) async fn web(
    endpoint: &str,
    key: &Result<Option<String>, String>,
    args: &WebArgs,
) -> Result<Option<String>, ToolError> {
    let mut arguments = json!({
        "query": args.query,
        "type": args.kind.map_or(json!("auto"), |k| json!(k)),
        "numResults": args.num_results.filter(|n| *n > 0).unwrap_or(DEFAULT_NUM_RESULTS),
        "livecrawl": args.livecrawl.map_or(json!("fallback"), |l| json!(l)),
    });
    if let Some(n) = args.context_max_characters {
        arguments["contextMaxCharacters"] = json!(n);
    }
    within(
        WEB_TIMEOUT,
        || "Search request timed out".into(),
        call(endpoint, key, "web_search_exa", arguments, "Search error"),
    )
    .await
}

/// A code search of `tokens` tokens: the text Exa returns, `None` when it found nothing.
pub(super) async fn code(
    endpoint: &str,
    key: &Result<Option<String>, String>,
    query: &str,
    tokens: u64,
) -> Result<Option<String>, ToolError> {
    let arguments = json!({"query": query, "tokensNum": tokens});
    within(
        CODE_TIMEOUT,
        || "Code search request timed out".into(),
        call(
            endpoint,
            key,
            "get_code_context_exa",
            arguments,
            "Code search error",
        ),
    )
    .await
}

/// Calls Exa's tool `name` with `arguments`; errors start with `label`.
async fn call(
    endpoint: &str,
    key: &Result<Option<String>, String>,
    name: &str,
    arguments: Value,
    label: &str,
) -> Result<Option<String>, ToolError> {
    let key = key
        .as_ref()
        .map_err(|e| ToolError::Failed(format!("{label}: {e}")))?;
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    });
    let mut request = client()?
        .post(endpoint)
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .json(&body);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let response = request
        .send()
        .await
        .map_err(|e| ToolError::Failed(format!("{label}: {}", e.without_url())))?;
    let status = response.status();
    let too_large = format!("{label}: the answer is larger than 5MB");
    let bytes = read_capped(response, MAX_ANSWER, &too_large).await?;
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        return Err(ToolError::Failed(format!(
            "{label} ({}): {}",
            status.as_u16(),
            super::cut_chars(text.trim(), 2000)
        )));
    }
    answer(&text).map_err(|e| ToolError::Failed(format!("{label}: {e}")))
}

/// The text of a JSON-RPC answer given as JSON or as `data:` lines of an event stream: the
/// first message with a result or an error decides.
fn answer(body: &str) -> Result<Option<String>, String> {
    let messages: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e})"))?]
    } else {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    };
    for message in messages {
        if let Some(error) = message.get("error") {
            let text = error["message"].as_str().unwrap_or("unknown error");
            return Err(text.to_string());
        }
        let Some(result) = message.get("result") else {
            continue;
        };
        let texts: Vec<&str> = result["content"]
            .as_array()
            .map(|items| items.iter().filter_map(|c| c["text"].as_str()).collect())
            .unwrap_or_default();
        if result["isError"] == true {
            return Err(texts.join("\n"));
        }
        return Ok((!texts.is_empty()).then(|| texts.join("\n\n")));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_as_json_or_event_stream() {
        let result =
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Title: A"}]}}"#;
        assert_eq!(answer(result).unwrap().as_deref(), Some("Title: A"));
        let stream = format!("event: message\ndata: {result}\n\n");
        assert_eq!(answer(&stream).unwrap().as_deref(), Some("Title: A"));
        assert_eq!(answer("").unwrap(), None);
        let empty = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        assert_eq!(answer(empty).unwrap(), None);
    }

    #[test]
    fn errors_and_failed_tools_are_errors() {
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad query"}}"#;
        assert_eq!(answer(error).unwrap_err(), "bad query");
        let failed = r#"data: {"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"rate limited"}]}}"#;
        assert_eq!(answer(failed).unwrap_err(), "rate limited");
        assert!(answer("{nope").unwrap_err().contains("not JSON"));
    }
}
