//! [`ModelRequest`] → the chat-completions request body.

use serde_json::{Map, Value, json};

use crate::model::data_url::{data_url_text, is_textual};
use crate::provider::{ChatMessage, Content, ModelRequest, Role};

/// The JSON body of `POST /chat/completions` for `request`, asking `model` to stream.
pub(crate) fn body(model: &str, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_string()));
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
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
    if let Some(n) = request.max_output_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    for (k, v) in &request.options {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// The wire messages: the system prompt first, then the history in order.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::new();
    let system: Vec<&str> = request
        .system
        .iter()
        .map(|s| s.as_str())
        .filter(|s| !s.trim().is_empty())
        .collect();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    for message in &request.messages {
        push_message(&mut out, message);
    }
    out
}

/// Appends the wire messages of one history message (a tool message may become several).
fn push_message(out: &mut Vec<Value>, message: &ChatMessage) {
    match message.role {
        Role::System => {
            out.push(json!({"role": "system", "content": message.joined_text()}));
        }
        Role::Assistant => out.push(assistant(message)),
        Role::User | Role::Tool => {
            // Tool results answer the previous assistant message, so they come first; anything
            // else (text, attachments) follows as a user message.
            let mut rest = Vec::new();
            for piece in &message.content {
                match piece {
                    Content::ToolResult {
                        call_id, output, ..
                    } => out.push(json!({
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": output,
                    })),
                    Content::ToolCall { .. } | Content::Reasoning { .. } => {}
                    other => rest.push(other),
                }
            }
            if !rest.is_empty() {
                out.push(user(&rest));
            }
        }
    }
}

/// A user message: a plain string for text only, else an array of content parts.
fn user(pieces: &[&Content]) -> Value {
    if let [Content::Text { text }] = pieces {
        return json!({"role": "user", "content": text});
    }
    let parts: Vec<Value> = pieces
        .iter()
        .filter_map(|piece| match piece {
            Content::Text { text } => Some(json!({"type": "text", "text": text})),
            Content::File {
                mime,
                url,
                filename,
            } => Some(file_part(mime, url, filename.as_deref())),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": parts})
}

/// Images as `image_url` parts; text files inline when their content is at hand; other files as
/// a text part naming the file.
fn file_part(mime: &str, url: &str, filename: Option<&str>) -> Value {
    if mime.starts_with("image/") {
        return json!({"type": "image_url", "image_url": {"url": url}});
    }
    file_text(mime, url, filename)
}

/// An assistant message: text (or null) and its tool calls.
fn assistant(message: &ChatMessage) -> Value {
    let text = message.joined_text();
    let calls: Vec<Value> = message
        .content
        .iter()
        .filter_map(|piece| match piece {
            Content::ToolCall { id, name, input } => Some(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments(input)},
            })),
            _ => None,
        })
        .collect();
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    if calls.is_empty() {
        m.insert("content".into(), Value::String(text));
    } else {
        let content = if text.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        };
        m.insert("content".into(), content);
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// A tool call's arguments as the JSON string the wire wants. A string input is taken to be the
/// raw (possibly invalid) arguments the model wrote, and is sent back unchanged.
fn arguments(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// A file as a text part (both wire formats write text parts alike): its content inline when it
/// is text at hand in a `data:` URL, else a note naming the file.
pub(in crate::provider) fn file_text(mime: &str, url: &str, filename: Option<&str>) -> Value {
    let name = filename.unwrap_or("attachment");
    if is_textual(mime)
        && let Some(text) = data_url_text(url)
    {
        return json!({
            "type": "text",
            "text": format!("<file name=\"{name}\" type=\"{mime}\">\n{text}\n</file>"),
        });
    }
    let location = if url.starts_with("data:") {
        String::new()
    } else {
        format!(" at {url}")
    };
    json!({
        "type": "text",
        "text": format!("[Attached file: {name} ({mime}){location}]"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolSpec;

    fn request() -> ModelRequest {
        ModelRequest {
            model: "gpt-test".into(),
            agent: "build".into(),
            system: vec!["You are helpful.".into(), "Be brief.".into()],
            messages: vec![
                ChatMessage::text(Role::User, "list files"),
                ChatMessage {
                    role: Role::Assistant,
                    content: vec![Content::ToolCall {
                        id: "call_1".into(),
                        name: "glob".into(),
                        input: json!({"pattern": "*.rs"}),
                    }],
                },
                ChatMessage {
                    role: Role::Tool,
                    content: vec![Content::ToolResult {
                        call_id: "call_1".into(),
                        name: "glob".into(),
                        output: "main.rs".into(),
                        is_error: false,
                    }],
                },
                ChatMessage::text(Role::Assistant, "main.rs"),
            ],
            tools: vec![ToolSpec {
                name: "glob".into(),
                description: "Find files".into(),
                parameters: json!({"type": "object"}).into(),
            }]
            .into(),
            temperature: Some(0.5),
            top_p: None,
            max_output_tokens: Some(100),
            options: Map::from_iter([("reasoning_effort".to_string(), json!("low"))]),
        }
    }

    #[test]
    fn maps_the_whole_request() {
        let body = body("gpt-test", &request());
        assert_eq!(
            body,
            json!({
                "model": "gpt-test",
                "messages": [
                    {"role": "system", "content": "You are helpful.\n\nBe brief."},
                    {"role": "user", "content": "list files"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "glob", "arguments": "{\"pattern\":\"*.rs\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "main.rs"},
                    {"role": "assistant", "content": "main.rs"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "glob", "description": "Find files", "parameters": {"type": "object"}
                }}],
                "temperature": 0.5,
                "max_tokens": 100,
                "stream": true,
                "stream_options": {"include_usage": true},
                "reasoning_effort": "low",
            })
        );
    }

    #[test]
    fn omits_empty_tools_and_system() {
        let req = ModelRequest {
            messages: vec![ChatMessage::text(Role::User, "hi")],
            ..ModelRequest::default()
        };
        let body = body("m", &req);
        assert!(body.get("tools").is_none());
        assert!(body.get("temperature").is_none());
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
    }

    #[test]
    fn options_override_defaults() {
        let req = ModelRequest {
            options: Map::from_iter([("stream_options".to_string(), Value::Null)]),
            ..ModelRequest::default()
        };
        assert_eq!(body("m", &req)["stream_options"], Value::Null);
    }

    #[test]
    fn files_become_parts() {
        let msg = ChatMessage {
            role: Role::User,
            content: vec![
                Content::Text {
                    text: "look".into(),
                },
                Content::File {
                    mime: "image/png".into(),
                    url: "data:image/png;base64,AAAA".into(),
                    filename: Some("a.png".into()),
                },
                Content::File {
                    mime: "text/plain".into(),
                    url: "data:text/plain;base64,aGVsbG8gd29ybGQ=".into(),
                    filename: Some("notes.txt".into()),
                },
                Content::File {
                    mime: "application/pdf".into(),
                    url: "https://example.com/a.pdf".into(),
                    filename: Some("a.pdf".into()),
                },
            ],
        };
        let mut out = Vec::new();
        push_message(&mut out, &msg);
        assert_eq!(
            out,
            vec![json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "<file name=\"notes.txt\" type=\"text/plain\">\nhello world\n</file>"},
                {"type": "text", "text": "[Attached file: a.pdf (application/pdf) at https://example.com/a.pdf]"},
            ]})]
        );
    }

    #[test]
    fn tool_results_come_before_other_pieces() {
        let msg = ChatMessage {
            role: Role::Tool,
            content: vec![
                Content::ToolResult {
                    call_id: "a".into(),
                    name: "read".into(),
                    output: "one".into(),
                    is_error: false,
                },
                Content::ToolResult {
                    call_id: "b".into(),
                    name: "read".into(),
                    output: "boom".into(),
                    is_error: true,
                },
                Content::Text {
                    text: "extra".into(),
                },
            ],
        };
        let mut out = Vec::new();
        push_message(&mut out, &msg);
        assert_eq!(
            out,
            vec![
                json!({"role": "tool", "tool_call_id": "a", "content": "one"}),
                json!({"role": "tool", "tool_call_id": "b", "content": "boom"}),
                json!({"role": "user", "content": "extra"}),
            ]
        );
    }

    #[test]
    fn raw_string_arguments_are_sent_unchanged() {
        assert_eq!(arguments(&json!("{bad json")), "{bad json");
        assert_eq!(arguments(&json!({"a": 1})), "{\"a\":1}");
    }
}
