//! [`ModelRequest`] → the Messages API request body.

use serde_json::{Map, Value, json};

use crate::provider::openai::request::file_text;
use crate::provider::{ChatMessage, Content, ModelRequest, Role};

/// `max_tokens` when the model's `output` limit is not configured (the API requires one).
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 8192;

/// `max_tokens` for the first Claude 3 models, whose output is capped at 4096.
const CLAUDE_3_MAX_TOKENS: u64 = 4096;

/// How many of the latest messages get a cache mark.
const CACHED_MESSAGES: usize = 2;

/// The JSON body of `POST /messages` for `request`, asking `model` to stream.
pub(crate) fn body(model: &str, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_string()));
    let max_tokens = request
        .max_output_tokens
        .unwrap_or_else(|| default_max_tokens(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    let system = system(request);
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.top_p {
        body.insert("top_p".into(), json!(p));
    }
    body.insert("stream".into(), Value::Bool(true));
    for (k, v) in &request.options {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// The output cap to ask for when none is configured.
fn default_max_tokens(model: &str) -> u64 {
    let first_claude_3 = ["claude-3-haiku", "claude-3-sonnet", "claude-3-opus"]
        .iter()
        .any(|p| model.starts_with(p));
    if first_claude_3 {
        CLAUDE_3_MAX_TOKENS
    } else {
        DEFAULT_MAX_TOKENS
    }
}

/// The `system` blocks: one text block per non-empty piece, the last one marked for caching.
fn system(request: &ModelRequest) -> Vec<Value> {
    let mut blocks: Vec<Value> = request
        .system
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| json!({"type": "text", "text": s}))
        .collect();
    if let Some(last) = blocks.last_mut() {
        mark(last);
    }
    blocks
}

/// The wire messages: roles alternate (consecutive same-role messages merged), tool results
/// lead their user message, and the last blocks of the latest two messages are marked.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut wire: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match wire.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => wire.push((role, blocks)),
        }
    }
    for (role, blocks) in &mut wire {
        if *role == "user" {
            // Stable: tool results first, in order, then the rest.
            blocks.sort_by_key(|b| b["type"] != "tool_result");
        }
    }
    trim_prefill(&mut wire);
    let start = wire.len().saturating_sub(CACHED_MESSAGES);
    for (_, blocks) in &mut wire[start..] {
        // Thinking blocks cannot carry a cache mark; the last block that can gets it.
        if let Some(last) = blocks.iter_mut().rev().find(|b| b["type"] != "thinking") {
            mark(last);
        }
    }
    wire.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The API refuses a final assistant message (a prefill) that ends in whitespace.
fn trim_prefill(wire: &mut Vec<(&'static str, Vec<Value>)>) {
    let Some((role, blocks)) = wire.last_mut() else {
        return;
    };
    if *role != "assistant" {
        return;
    }
    if let Some(last) = blocks.last_mut()
        && last["type"] == "text"
    {
        let trimmed = last["text"].as_str().unwrap_or("").trim_end().to_string();
        if trimmed.is_empty() {
            blocks.pop();
        } else {
            last["text"] = Value::String(trimmed);
        }
    }
    if blocks.is_empty() {
        wire.pop();
    }
}

/// Marks a block as the end of a cacheable prefix.
fn mark(block: &mut Value) {
    if let Value::Object(map) = block {
        map.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The wire role and content blocks of one history message. Tool results and system text go
/// in user messages (the Messages API has no other roles); empty text is dropped.
fn blocks(message: &ChatMessage) -> (&'static str, Vec<Value>) {
    let role = match message.role {
        Role::Assistant => "assistant",
        Role::User | Role::Tool | Role::System => "user",
    };
    let blocks = message
        .content
        .iter()
        .filter_map(|piece| match piece {
            Content::Text { text } if text.is_empty() => None,
            Content::Text { text } => Some(json!({"type": "text", "text": text})),
            Content::File {
                mime,
                url,
                filename,
            } => Some(file_block(mime, url, filename.as_deref())),
            Content::ToolCall { id, name, input } if role == "assistant" => Some(json!({
                "type": "tool_use",
                "id": id,
                "name": name,
                "input": tool_input(input),
            })),
            Content::ToolCall { .. } => None,
            // Thinking goes back only with its signature, which the API checks.
            Content::Reasoning {
                text,
                signature: Some(signature),
            } if role == "assistant" => Some(json!({
                "type": "thinking",
                "thinking": text,
                "signature": signature,
            })),
            Content::Reasoning { .. } => None,
            Content::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": output,
                });
                if *is_error {
                    block["is_error"] = Value::Bool(true);
                }
                Some(block)
            }
        })
        .collect();
    (role, blocks)
}

/// A tool call's input as the object the wire wants. A string is the raw arguments the model
/// wrote: parsed when it is a JSON object, else sent as `{}`.
fn tool_input(input: &Value) -> Value {
    match input {
        Value::Object(_) => input.clone(),
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({}),
        },
        _ => json!({}),
    }
}

/// Images and PDFs as `image` / `document` blocks (base64 from `data:` URLs, else by URL);
/// text files inline when their content is at hand; other files as a text block naming them.
fn file_block(mime: &str, url: &str, filename: Option<&str>) -> Value {
    let kind = if mime.starts_with("image/") {
        Some("image")
    } else if mime == "application/pdf" {
        Some("document")
    } else {
        None
    };
    if let Some(kind) = kind {
        if let Some(data) = base64_payload(url) {
            return json!({
                "type": kind,
                "source": {"type": "base64", "media_type": mime, "data": data},
            });
        }
        if url.starts_with("http://") || url.starts_with("https://") {
            return json!({"type": kind, "source": {"type": "url", "url": url}});
        }
    }
    file_text(mime, url, filename)
}

/// The base64 data of a `data:…;base64,` URL.
fn base64_payload(url: &str) -> Option<&str> {
    let (meta, data) = url.strip_prefix("data:")?.split_once(',')?;
    meta.ends_with(";base64").then_some(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolSpec;

    fn call(id: &str) -> Content {
        Content::ToolCall {
            id: id.into(),
            name: "read".into(),
            input: json!({"filePath": "a.txt"}),
        }
    }

    fn result(id: &str, output: &str, is_error: bool) -> Content {
        Content::ToolResult {
            call_id: id.into(),
            name: "read".into(),
            output: output.into(),
            is_error,
        }
    }

    #[test]
    fn maps_the_whole_request() {
        let request = ModelRequest {
            model: "ignored".into(),
            agent: "build".into(),
            system: vec!["You are helpful.".into(), " ".into(), "Env: linux".into()],
            messages: vec![
                ChatMessage::text(Role::User, "read a.txt"),
                ChatMessage {
                    role: Role::Assistant,
                    content: vec![
                        Content::Text {
                            text: "Reading.".into(),
                        },
                        call("toolu_1"),
                    ],
                },
                ChatMessage {
                    role: Role::Tool,
                    content: vec![result("toolu_1", "hello", false)],
                },
                ChatMessage::text(Role::Assistant, "It says hello."),
                ChatMessage::text(Role::User, "thanks"),
            ],
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object", "properties": {}}).into(),
            }]
            .into(),
            temperature: Some(0.3),
            top_p: None,
            max_output_tokens: Some(1000),
            options: Map::from_iter([(
                "thinking".to_string(),
                json!({"type": "enabled", "budget_tokens": 500}),
            )]),
        };
        let eph = json!({"type": "ephemeral"});
        assert_eq!(
            body("claude-test", &request),
            json!({
                "model": "claude-test",
                "max_tokens": 1000,
                "system": [
                    {"type": "text", "text": "You are helpful."},
                    {"type": "text", "text": "Env: linux", "cache_control": eph},
                ],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Reading."},
                        {"type": "tool_use", "id": "toolu_1", "name": "read",
                         "input": {"filePath": "a.txt"}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "It says hello.", "cache_control": eph},
                    ]},
                    {"role": "user", "content": [
                        {"type": "text", "text": "thanks", "cache_control": eph},
                    ]},
                ],
                "tools": [{"name": "read", "description": "Read a file",
                           "input_schema": {"type": "object", "properties": {}}}],
                "temperature": 0.3,
                "stream": true,
                "thinking": {"type": "enabled", "budget_tokens": 500},
            })
        );
    }

    #[test]
    fn consecutive_same_role_messages_are_merged_with_tool_results_first() {
        let request = ModelRequest {
            messages: vec![
                ChatMessage::text(Role::User, "one"),
                ChatMessage::text(Role::User, "two"),
                ChatMessage {
                    role: Role::Assistant,
                    content: vec![call("a"), call("b")],
                },
                ChatMessage {
                    role: Role::Tool,
                    content: vec![result("a", "ok", false), result("b", "boom", true)],
                },
                // A queued user message right after the tool results.
                ChatMessage::text(Role::User, "also this"),
                // An empty assistant message disappears; the users around it merge.
                ChatMessage::text(Role::Assistant, ""),
                ChatMessage::text(Role::System, "a late system note"),
            ],
            ..ModelRequest::default()
        };
        let messages = body("m", &request)["messages"].clone();
        let roles: Vec<&str> = messages
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            messages[0]["content"],
            json!([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}])
        );
        let last = &messages[2]["content"];
        assert_eq!(last[0]["type"], "tool_result");
        assert_eq!(last[1]["type"], "tool_result");
        assert_eq!(last[1]["is_error"], true);
        assert!(last[0].get("is_error").is_none());
        assert_eq!(last[2]["text"], "also this");
        assert_eq!(last[3]["text"], "a late system note");
        assert_eq!(last[3]["cache_control"], json!({"type": "ephemeral"}));
        // The second-latest message is marked on its last block only.
        assert!(messages[1]["content"][0].get("cache_control").is_none());
        assert_eq!(
            messages[1]["content"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        // Nothing before the latest two is marked.
        assert!(messages[0]["content"][1].get("cache_control").is_none());
    }

    #[test]
    fn defaults_without_system_tools_or_limits() {
        let request = ModelRequest {
            messages: vec![ChatMessage::text(Role::User, "hi")],
            ..ModelRequest::default()
        };
        let b = body("claude-sonnet-4-5", &request);
        assert_eq!(b["max_tokens"], DEFAULT_MAX_TOKENS);
        assert!(b.get("system").is_none());
        assert!(b.get("tools").is_none());
        assert!(b.get("temperature").is_none());
        assert_eq!(b["stream"], true);
        assert_eq!(
            body("claude-3-haiku-20240307", &request)["max_tokens"],
            CLAUDE_3_MAX_TOKENS
        );
    }

    #[test]
    fn a_final_assistant_prefill_loses_trailing_whitespace() {
        let request = ModelRequest {
            messages: vec![
                ChatMessage::text(Role::User, "hi"),
                ChatMessage::text(Role::Assistant, "Stop now.\n\n"),
            ],
            ..ModelRequest::default()
        };
        let b = body("m", &request);
        assert_eq!(b["messages"][1]["content"][0]["text"], "Stop now.");
    }

    #[test]
    fn signed_reasoning_goes_back_as_thinking() {
        let request = ModelRequest {
            messages: vec![
                ChatMessage::text(Role::User, "hi"),
                ChatMessage {
                    role: Role::Assistant,
                    content: vec![
                        Content::Reasoning {
                            text: "hmm".into(),
                            signature: Some("sig".into()),
                        },
                        Content::Reasoning {
                            text: "unsigned".into(),
                            signature: None,
                        },
                        call("toolu_1"),
                    ],
                },
                ChatMessage {
                    role: Role::Tool,
                    content: vec![result("toolu_1", "ok", false)],
                },
            ],
            ..ModelRequest::default()
        };
        let b = body("m", &request);
        let assistant = &b["messages"][1]["content"];
        assert_eq!(
            assistant[0],
            json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})
        );
        assert_eq!(assistant[1]["type"], "tool_use");
        assert_eq!(assistant[1]["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(assistant.as_array().map(Vec::len), Some(2));
        // A message of thinking alone gets no mark (the API refuses one there).
        let request = ModelRequest {
            messages: vec![
                ChatMessage::text(Role::User, "hi"),
                ChatMessage {
                    role: Role::Assistant,
                    content: vec![Content::Reasoning {
                        text: "x".into(),
                        signature: Some("s".into()),
                    }],
                },
            ],
            ..ModelRequest::default()
        };
        let b = body("m", &request);
        assert!(
            b["messages"][1]["content"][0]
                .get("cache_control")
                .is_none()
        );
        assert_eq!(
            b["messages"][0]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
    }

    #[test]
    fn raw_tool_input_becomes_an_object() {
        assert_eq!(tool_input(&json!("{\"a\":1}")), json!({"a": 1}));
        assert_eq!(tool_input(&json!("{broken")), json!({}));
        assert_eq!(tool_input(&json!([1])), json!({}));
    }

    #[test]
    fn files_become_blocks() {
        assert_eq!(
            file_block("image/png", "data:image/png;base64,AAAA", None),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
        );
        assert_eq!(
            file_block("application/pdf", "https://x/a.pdf", Some("a.pdf")),
            json!({"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}})
        );
        assert_eq!(
            file_block(
                "text/markdown",
                "data:text/markdown;base64,aGk=",
                Some("a.md")
            )["text"],
            "<file name=\"a.md\" type=\"text/markdown\">\nhi\n</file>"
        );
        assert_eq!(
            file_block("application/zip", "file:///a.zip", Some("a.zip"))["text"],
            "[Attached file: a.zip (application/zip) at file:///a.zip]"
        );
    }
}
