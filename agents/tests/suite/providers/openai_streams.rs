//! The OpenAI-compatible adapter on success: text deltas in order, the request body and headers,
//! parallel tool calls, usage and reasoning, and the fake server answering by request.

use serde_json::json;
use taskforce_agents::provider::{ChatMessage, Content, FinishReason, ModelEvent, Role, Usage};
use taskforce_testkit::fake_openai::{Chunk, FakeOpenAi, Response};

use super::{
    WAIT, call, calls_of, finish_of, openai, openai_with_key, text_of, tool, user_request,
};

#[tokio::test]
async fn openai_streams_text_deltas_in_order() {
    let server = FakeOpenAi::start(|_| Response::text("Hello brave new world"))
        .await
        .unwrap();
    let events = call(&openai(&server), user_request("hi")).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Hello ".into()),
            ModelEvent::TextDelta("brave ".into()),
            ModelEvent::TextDelta("new ".into()),
            ModelEvent::TextDelta("world".into()),
            ModelEvent::Usage(Usage {
                input: 10,
                output: 4,
                ..Usage::default()
            }),
            ModelEvent::Finish(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn openai_request_body_and_headers() {
    let server = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let model = openai_with_key(&server, Some("sk-test"));
    let mut request = user_request("list the files");
    request.system.push("Second part.".into());
    request.tools = vec![tool("glob"), tool("read")].into();
    request.temperature = Some(0.2);
    request.max_output_tokens = Some(512);
    request.messages.push(ChatMessage {
        role: Role::Assistant,
        content: vec![
            Content::Text {
                text: "Looking.".into(),
            },
            Content::ToolCall {
                id: "call_1".into(),
                name: "glob".into(),
                input: json!({"pattern": "**/*.py"}),
            },
        ],
    });
    request.messages.push(ChatMessage {
        role: Role::Tool,
        content: vec![Content::ToolResult {
            call_id: "call_1".into(),
            name: "glob".into(),
            output: "src/server.py".into(),
            is_error: false,
        }],
    });
    call(&model, request).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(r.header("x-title"), Some("taskforce-tests"));
    assert_eq!(r.body["model"], "gpt-test");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(r.body["temperature"], 0.2);
    assert_eq!(r.body["max_tokens"], 512);
    assert!(r.body.get("top_p").is_none());
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "system", "content": "You are a test.\n\nSecond part."},
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "glob", "arguments": "{\"pattern\":\"**/*.py\"}"}
            }]},
            {"role": "tool", "tool_call_id": "call_1", "content": "src/server.py"},
        ])
    );
    assert_eq!(r.tool_names(), vec!["glob", "read"]);
    assert_eq!(
        r.body["tools"][0],
        json!({"type": "function", "function": {
            "name": "glob", "description": "the glob tool",
            "parameters": {"type": "object", "properties": {}}
        }})
    );
}

#[tokio::test]
async fn openai_without_key_sends_no_authorization() {
    let server = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    call(&openai(&server), user_request("hi")).await;
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn openai_assembles_parallel_tool_calls() {
    // Two calls whose argument pieces interleave, finish before usage.
    let server = FakeOpenAi::start(|_| {
        Response::Stream(vec![
            Chunk::role(),
            Chunk::text("Let me look."),
            Chunk::tool_call_start(0, "call_a", "glob"),
            Chunk::tool_call_args(0, "{\"pattern\":"),
            Chunk::tool_call_start(1, "call_b", "grep"),
            Chunk::tool_call_args(1, "{\"pattern\":\"def handle_\","),
            Chunk::tool_call_args(0, "\"src/**/*.py\"}"),
            Chunk::tool_call_args(1, "\"include\":\"*.py\"}"),
            Chunk::finish("tool_calls"),
            Chunk::usage(50, 30),
            Chunk::done(),
        ])
    })
    .await
    .unwrap();
    let events = call(&openai(&server), user_request("go")).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Let me look.".into()),
            ModelEvent::ToolCallStart {
                id: "call_a".into(),
                name: "glob".into()
            },
            ModelEvent::ToolCallStart {
                id: "call_b".into(),
                name: "grep".into()
            },
            ModelEvent::ToolCall {
                id: "call_a".into(),
                name: "glob".into(),
                arguments: "{\"pattern\":\"src/**/*.py\"}".into(),
            },
            ModelEvent::ToolCall {
                id: "call_b".into(),
                name: "grep".into(),
                arguments: "{\"pattern\":\"def handle_\",\"include\":\"*.py\"}".into(),
            },
            ModelEvent::Usage(Usage {
                input: 50,
                output: 30,
                ..Usage::default()
            }),
            ModelEvent::Finish(FinishReason::ToolCalls),
        ]
    );
}

#[tokio::test]
async fn openai_tool_calls_helper_round_trips() {
    let server = FakeOpenAi::queue(vec![Response::tool_calls(&[
        ("c1", "read", r#"{"filePath":"src/server.py"}"#),
        ("c2", "read", r#"{"filePath":"src/config.py"}"#),
    ])])
    .await
    .unwrap();
    let events = call(&openai(&server), user_request("go")).await;
    assert_eq!(
        calls_of(&events),
        vec![
            (
                "c1".to_string(),
                "read".to_string(),
                json!({"filePath": "src/server.py"})
            ),
            (
                "c2".to_string(),
                "read".to_string(),
                json!({"filePath": "src/config.py"})
            ),
        ]
    );
    assert_eq!(finish_of(&events), FinishReason::ToolCalls);
}

#[tokio::test]
async fn openai_maps_usage_and_reasoning() {
    let server = FakeOpenAi::start(|_| {
        Response::Stream(vec![
            Chunk::role(),
            Chunk::reasoning("Thinking"),
            Chunk::choice(json!({"reasoning": " more"}), None),
            Chunk::text("Answer"),
            Chunk::finish("length"),
            Chunk::usage_detailed(1000, 200, 600, 50),
            Chunk::done(),
        ])
    })
    .await
    .unwrap();
    let events = call(&openai(&server), user_request("q")).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta("Thinking".into()),
            ModelEvent::ReasoningDelta(" more".into()),
            ModelEvent::TextDelta("Answer".into()),
            ModelEvent::Usage(Usage {
                input: 400,
                output: 200,
                reasoning: 50,
                cache_read: 600,
                cache_write: 0,
            }),
            ModelEvent::Finish(FinishReason::Length),
        ]
    );
}

#[tokio::test]
async fn fake_server_answers_by_request() {
    let server = FakeOpenAi::start(|req| {
        if req.last_role() == Some("tool") {
            Response::text("done")
        } else if req.contains("read it") {
            Response::tool_calls(&[("c1", "read", r#"{"filePath":"a"}"#)])
        } else {
            Response::text("?")
        }
    })
    .await
    .unwrap();
    let model = openai(&server);
    let events = call(&model, user_request("read it")).await;
    assert_eq!(calls_of(&events).len(), 1);
    let mut request = user_request("read it");
    request.messages.push(ChatMessage {
        role: Role::Tool,
        content: vec![Content::ToolResult {
            call_id: "c1".into(),
            name: "read".into(),
            output: "content".into(),
            is_error: false,
        }],
    });
    assert_eq!(text_of(&call(&model, request).await), "done");
    assert!(server.wait_for_requests(2, WAIT).await);
    assert_eq!(server.requests().len(), 2);
}
