//! Model providers: the OpenAI-compatible adapter over real HTTP against the fake server, the
//! scripted model and its built-in scripts, the provider registry, cost.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use taskforce_agents::config::{Config, CostConfig};
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::{
    ChatMessage, Content, FinishReason, LanguageModel, ModelEvent, ModelRequest, ModelStream,
    OpenAiModel, OpenAiProvider, OpenAiSettings, ProviderError, Providers, Role, Script,
    ScriptedModel, ToolSpec, Usage, cost,
};
use taskforce_testkit::fake_openai::{Chunk, FakeOpenAi, Response};

use super::fixture::Fixture;

const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// helpers

fn openai(server: &FakeOpenAi) -> OpenAiModel {
    openai_with_key(server, None)
}

fn openai_with_key(server: &FakeOpenAi, key: Option<&str>) -> OpenAiModel {
    let provider = OpenAiProvider::new(
        "fake",
        OpenAiSettings {
            base_url: server.base_url(),
            api_key: key.map(str::to_string),
            headers: [("X-Title".to_string(), "taskforce-tests".to_string())]
                .into_iter()
                .collect(),
        },
    )
    .unwrap();
    OpenAiModel::new(Arc::new(provider), "gpt-test")
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool").into(),
        parameters: json!({"type": "object", "properties": {}}).into(),
    }
}

fn user_request(text: &str) -> ModelRequest {
    ModelRequest {
        model: "gpt-test".into(),
        agent: "build".into(),
        system: vec!["You are a test.".into()],
        messages: vec![ChatMessage::text(Role::User, text)],
        ..ModelRequest::default()
    }
}

/// Every event of a stream, and the error that ended it, if any.
async fn drain(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ProviderError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

async fn call(model: &dyn LanguageModel, request: ModelRequest) -> Vec<ModelEvent> {
    let (events, error) = drain(model.stream(&request).await.unwrap()).await;
    assert!(error.is_none(), "unexpected error {error:?}");
    events
}

fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The complete tool calls of a response, arguments parsed.
fn calls_of(events: &[ModelEvent]) -> Vec<(String, String, Value)> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall {
                id,
                name,
                arguments,
            } => Some((
                id.clone(),
                name.clone(),
                serde_json::from_str(arguments).unwrap(),
            )),
            _ => None,
        })
        .collect()
}

fn finish_of(events: &[ModelEvent]) -> FinishReason {
    match events.last() {
        Some(ModelEvent::Finish(reason)) => reason.clone(),
        other => panic!("the last event is not a finish: {other:?}"),
    }
}

async fn stream_error(model: &dyn LanguageModel) -> ProviderError {
    match model.stream(&user_request("hi")).await {
        Ok(stream) => drain(stream).await.1.expect("the stream should fail"),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// openai over HTTP

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
async fn openai_http_500_is_retryable() {
    let server = FakeOpenAi::start(|_| Response::error(500, "upstream exploded"))
        .await
        .unwrap();
    let err = stream_error(&openai(&server)).await;
    match &err {
        ProviderError::Http {
            provider,
            status,
            body,
            retry_after,
        } => {
            assert_eq!(provider, "fake");
            assert_eq!(*status, 500);
            assert!(body.contains("upstream exploded"), "{body}");
            assert_eq!(*retry_after, None);
        }
        other => panic!("expected Http, got {other:?}"),
    }
    assert!(err.is_retryable());
    assert!(err.to_string().contains("HTTP 500"), "{err}");
}

#[tokio::test]
async fn openai_429_parses_retry_after() {
    let server = FakeOpenAi::queue(vec![
        Response::error(429, "slow down").with_header("retry-after", "3"),
        Response::error(429, "slow down").with_header("retry-after-ms", "250"),
    ])
    .await
    .unwrap();
    let model = openai(&server);
    for expected in [Duration::from_secs(3), Duration::from_millis(250)] {
        let err = stream_error(&model).await;
        assert!(err.is_retryable());
        match err {
            ProviderError::Http {
                status: 429,
                retry_after,
                ..
            } => assert_eq!(retry_after, Some(expected)),
            other => panic!("expected 429, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn openai_401_is_auth() {
    let server = FakeOpenAi::start(|_| Response::error(401, "Incorrect API key provided"))
        .await
        .unwrap();
    let err = stream_error(&openai_with_key(&server, Some("bad"))).await;
    assert_eq!(
        err,
        ProviderError::Auth {
            provider: "fake".into(),
            message: "Incorrect API key provided".into()
        }
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_context_overflow() {
    let body = json!({"error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded"
    }});
    let server = FakeOpenAi::start(move |_| Response::status(400, body.to_string()))
        .await
        .unwrap();
    let err = stream_error(&openai(&server)).await;
    match &err {
        ProviderError::ContextOverflow { message } => {
            assert!(message.contains("maximum context length"), "{message}")
        }
        other => panic!("expected ContextOverflow, got {other:?}"),
    }
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_plain_400_is_http() {
    let server = FakeOpenAi::start(|_| Response::error(400, "Invalid value for 'tools'"))
        .await
        .unwrap();
    let err = stream_error(&openai(&server)).await;
    assert!(
        matches!(err, ProviderError::Http { status: 400, .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_stream_without_finish_is_cut() {
    let server = FakeOpenAi::queue(vec![
        // Ends cleanly but never says why.
        Response::Stream(vec![Chunk::role(), Chunk::text("Hel"), Chunk::text("lo")]),
        // [DONE] without a finish reason.
        Response::Stream(vec![Chunk::text("Hello"), Chunk::done()]),
        // The connection drops inside the body.
        Response::Stream(vec![Chunk::text("Hello"), Chunk::Hangup]),
    ])
    .await
    .unwrap();
    let model = openai(&server);
    for _ in 0..3 {
        let (events, err) = drain(model.stream(&user_request("hi")).await.unwrap()).await;
        assert!(!events.iter().any(|e| matches!(e, ModelEvent::Finish(_))));
        let err = err.expect("the stream should fail");
        assert!(matches!(err, ProviderError::StreamCut { .. }), "{err:?}");
        assert!(err.is_retryable());
    }
}

#[tokio::test]
async fn openai_malformed_chunk_is_decode_error() {
    let server = FakeOpenAi::start(|_| {
        Response::Stream(vec![
            Chunk::text("ok"),
            Chunk::raw("{\"choices\": [oops"),
            Chunk::done(),
        ])
    })
    .await
    .unwrap();
    let (events, err) = drain(openai(&server).stream(&user_request("hi")).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("ok".into())]);
    assert!(matches!(err, Some(ProviderError::Decode { .. })), "{err:?}");
}

#[tokio::test]
async fn openai_error_chunk_mid_stream() {
    let server = FakeOpenAi::start(|_| {
        Response::Stream(vec![
            Chunk::text("partial"),
            Chunk::json(json!({"error": {"message": "Provider overloaded", "code": 502}})),
        ])
    })
    .await
    .unwrap();
    let (_, err) = drain(openai(&server).stream(&user_request("hi")).await.unwrap()).await;
    let err = err.unwrap();
    assert!(
        matches!(err, ProviderError::Http { status: 502, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn openai_connection_refused() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let provider = OpenAiProvider::new(
        "down",
        OpenAiSettings {
            base_url: format!("http://{addr}/v1"),
            ..OpenAiSettings::default()
        },
    )
    .unwrap();
    let model = OpenAiModel::new(Arc::new(provider), "m");
    let err = stream_error(&model).await;
    assert!(matches!(err, ProviderError::Connection { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn dropping_the_stream_drops_the_connection() {
    let server =
        FakeOpenAi::start(|_| Response::text("one two three four five six").stall_after(3))
            .await
            .unwrap();
    let model = openai(&server);
    let mut stream = model.stream(&user_request("hi")).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, ModelEvent::TextDelta("one ".into()));
    assert_eq!(server.disconnects(), 0);
    drop(stream);
    assert!(
        server.wait_for_disconnects(1, WAIT).await,
        "the server did not see the client go away"
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

// ---------------------------------------------------------------------------------------------
// scripted

fn scripted(script: &str) -> ScriptedModel {
    ScriptedModel::new(
        ModelRef::new("scripted", "test"),
        Arc::new(Script::from_json("test", script).unwrap()),
    )
}

fn request(agent: &str, tools: &[&str], messages: Vec<ChatMessage>) -> ModelRequest {
    ModelRequest {
        model: "test".into(),
        agent: agent.into(),
        system: vec!["system".into()],
        messages,
        tools: std::sync::Arc::new(tools.iter().map(|t| tool(t)).collect()),
        ..ModelRequest::default()
    }
}

fn assistant_calls(calls: &[(String, String, Value)]) -> ChatMessage {
    ChatMessage {
        role: Role::Assistant,
        content: calls
            .iter()
            .map(|(id, name, input)| Content::ToolCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            })
            .collect(),
    }
}

fn tool_results(results: &[(&str, &str, &str)]) -> ChatMessage {
    ChatMessage {
        role: Role::Tool,
        content: results
            .iter()
            .map(|(id, name, output)| Content::ToolResult {
                call_id: id.to_string(),
                name: name.to_string(),
                output: output.to_string(),
                is_error: false,
            })
            .collect(),
    }
}

const RULES: &str = r#"{
  "rules": [
    {"when": {"agent": "a", "turn": 1, "last_role": "tool", "contains": "needle"},
     "reply": {"text": "found it: {{last}}"}},
    {"when": {"agent": "a", "tool": "bash", "last_role": "user"},
     "reply": {"reasoning": "use bash", "tool_calls": [
        {"name": "bash", "input": {"command": "echo {{last}}"}},
        {"name": "bash", "input": {"command": "pwd"}}]}},
    {"when": {"agent": "a", "no_tool": "bash", "last_role": "user"},
     "reply": {"text": "no bash for me"}},
    {"when": {"last_role": "assistant"}, "reply": {"text": "you spoke last"}}
  ],
  "fallback": {"text": "fallback for {{agent}}"}
}"#;

#[tokio::test]
async fn scripted_rules_match_in_order() {
    let model = scripted(RULES);
    let user = || ChatMessage::text(Role::User, "hi there");

    // tool + last_role user → parallel tool calls, templates filled in.
    let events = call(&model, request("a", &["bash"], vec![user()])).await;
    assert_eq!(
        events.first(),
        Some(&ModelEvent::ReasoningDelta("use bash".into()))
    );
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].2, json!({"command": "echo hi there"}));
    assert_eq!(calls[1].2, json!({"command": "pwd"}));
    assert_ne!(calls[0].0, calls[1].0);
    assert!(
        calls
            .iter()
            .all(|(id, name, _)| id.starts_with("call_") && name == "bash")
    );
    assert_eq!(finish_of(&events), FinishReason::ToolCalls);
    let starts = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallStart { .. }))
        .count();
    assert_eq!(starts, 2);

    // no_tool.
    let events = call(&model, request("a", &["read"], vec![user()])).await;
    assert_eq!(text_of(&events), "no bash for me");
    assert_eq!(finish_of(&events), FinishReason::Stop);

    // turn + last_role tool + contains.
    let history = vec![
        user(),
        assistant_calls(&calls),
        tool_results(&[("x", "bash", "a needle here")]),
    ];
    let events = call(&model, request("a", &["bash"], history.clone())).await;
    assert_eq!(text_of(&events), "found it: a needle here");

    // contains fails → later rules → fallback.
    let mut other = history.clone();
    other[2] = tool_results(&[("x", "bash", "nothing")]);
    let events = call(&model, request("a", &["bash"], other)).await;
    assert_eq!(text_of(&events), "fallback for a");

    // last_role assistant, any agent.
    let events = call(
        &model,
        request("z", &[], vec![ChatMessage::text(Role::Assistant, "me")]),
    )
    .await;
    assert_eq!(text_of(&events), "you spoke last");

    // agent mismatch → fallback.
    let events = call(&model, request("b", &["bash"], vec![user()])).await;
    assert_eq!(text_of(&events), "fallback for b");
}

#[tokio::test(start_paused = true)]
async fn scripted_waits_delay_ms_before_each_chunk() {
    let model = scripted(
        r#"{"rules": [{"when": {}, "delay_ms": 100, "reply": {
            "reasoning": "hmm", "text": "one two three four five six seven",
            "tool_calls": [{"name": "a"}, {"name": "b"}]}}]}"#,
    );
    let started = tokio::time::Instant::now();
    let mut stream = model.stream(&request("x", &[], vec![])).await.unwrap();
    let mut paced = 0;
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if matches!(
            event,
            ModelEvent::TextDelta(_)
                | ModelEvent::ReasoningDelta(_)
                | ModelEvent::ToolCallStart { .. }
        ) {
            paced += 1;
            assert_eq!(started.elapsed(), Duration::from_millis(100 * paced));
        }
    }
    // reasoning (1 chunk) + text (3 chunks) + 2 tool calls
    assert_eq!(paced, 6);
}

#[tokio::test]
async fn scripted_without_fallback_says_no_rule_matched() {
    let model = scripted(r#"{"rules": [{"when": {"agent": "x"}, "reply": {"text": "x"}}]}"#);
    let events = call(
        &model,
        request("build", &[], vec![ChatMessage::text(Role::User, "hi")]),
    )
    .await;
    let text = text_of(&events);
    assert!(text.contains("No rule"), "{text}");
    assert!(text.contains("build"), "{text}");
    assert_eq!(finish_of(&events), FinishReason::Stop);
}

#[tokio::test]
async fn scripted_streams_text_in_word_chunks_with_usage() {
    let model = ScriptedModel::load(ModelRef::new("scripted", "echo"), "echo").unwrap();
    let text = "the quick brown fox jumps over the lazy dog and keeps running far away";
    let events = call(
        &model,
        request("build", &[], vec![ChatMessage::text(Role::User, text)]),
    )
    .await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() > 1, "{deltas:?}");
    assert_eq!(deltas.concat(), text);
    for d in &deltas[..deltas.len() - 1] {
        assert!(d.ends_with(' '), "{d:?} does not end on a word boundary");
    }
    let usage = events
        .iter()
        .find_map(|e| match e {
            ModelEvent::Usage(u) => Some(*u),
            _ => None,
        })
        .unwrap();
    assert_eq!(usage.output, text.len().div_ceil(4) as u64);
    assert!(usage.input > 0);
    assert!(matches!(events[events.len() - 2], ModelEvent::Usage(_)));
}

#[tokio::test]
async fn scripted_tool_call_ids_are_unique() {
    let model =
        scripted(r#"{"fallback": {"tool_calls": [{"name": "t"}, {"name": "t"}, {"name": "t"}]}}"#);
    let mut ids = std::collections::HashSet::new();
    for _ in 0..5 {
        let events = call(&model, request("a", &[], vec![])).await;
        for (id, _, input) in calls_of(&events) {
            assert_eq!(input, json!({}));
            assert!(ids.insert(id));
        }
    }
    assert_eq!(ids.len(), 15);
}

#[tokio::test]
async fn scripted_script_from_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    std::fs::write(&path, r#"{"fallback": {"text": "from a file"}}"#).unwrap();
    let model = ScriptedModel::load(ModelRef::new("s", "m"), path.to_str().unwrap()).unwrap();
    let events = call(&model, request("a", &[], vec![])).await;
    assert_eq!(text_of(&events), "from a file");

    std::fs::write(&path, r#"{"rules": [{"reply": {"txt": "typo"}}]}"#).unwrap();
    let err = ScriptedModel::load(ModelRef::new("s", "m"), path.to_str().unwrap()).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("rules[0].reply"), "{message}");
    assert!(message.contains("txt"), "{message}");
}

/// Checks a tool input has the required keys and no others than `allowed`.
fn assert_schema(input: &Value, required: &[&str], optional: &[&str]) {
    let object = input.as_object().unwrap();
    for key in required {
        assert!(
            object.get(*key).is_some_and(Value::is_string),
            "missing {key} in {input}"
        );
    }
    for key in object.keys() {
        assert!(
            required.contains(&key.as_str()) || optional.contains(&key.as_str()),
            "unexpected key {key} in {input}"
        );
    }
}

/// One explore subagent, driven through the demo script: glob, read, grep, answer.
async fn run_explore(model: &ScriptedModel, prompt: &str, expect_file: &str) -> String {
    let tools = ["bash", "read", "list", "glob", "grep"];
    let mut history = vec![ChatMessage::text(Role::User, prompt)];
    let steps = [
        ("glob", vec!["pattern"], vec!["path"]),
        ("read", vec!["filePath"], vec!["offset", "limit"]),
        ("grep", vec!["pattern"], vec!["path", "include"]),
    ];
    for (turn, (tool_name, required, optional)) in steps.iter().enumerate() {
        let events = call(model, request("explore", &tools, history.clone())).await;
        let calls = calls_of(&events);
        assert_eq!(calls.len(), 1, "turn {turn}: {events:?}");
        let (id, name, input) = &calls[0];
        assert_eq!(name, tool_name, "turn {turn}");
        assert_schema(input, required, optional);
        if *tool_name == "read" {
            assert_eq!(input["filePath"], expect_file);
        }
        let output = format!("<{tool_name} output for {expect_file}>");
        history.push(assistant_calls(&calls));
        history.push(tool_results(&[(id, name, &output)]));
    }
    let events = call(model, request("explore", &tools, history)).await;
    assert!(calls_of(&events).is_empty());
    assert_eq!(finish_of(&events), FinishReason::Stop);
    let answer = text_of(&events);
    assert!(
        answer.contains(&format!("<grep output for {expect_file}>")),
        "{answer}"
    );
    answer
}

#[tokio::test(start_paused = true)]
async fn demo_script_walks_build_and_explore() {
    let model = ScriptedModel::load(ModelRef::new("scripted", "demo"), "demo").unwrap();
    let build_tools = [
        "bash",
        "read",
        "write",
        "edit",
        "list",
        "glob",
        "grep",
        "todowrite",
        "todoread",
        "task",
    ];
    let prompt = ChatMessage::text(Role::User, "Give me an overview of this project.");
    let events = call(&model, request("build", &build_tools, vec![prompt.clone()])).await;
    assert!(!text_of(&events).is_empty());
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 3, "three task calls in one step");
    assert_eq!(finish_of(&events), FinishReason::ToolCalls);
    let mut prompts = Vec::new();
    for (_, name, input) in &calls {
        assert_eq!(name, "task");
        assert_schema(input, &["description", "prompt", "subagent_type"], &[]);
        assert_eq!(input["subagent_type"], "explore");
        prompts.push(input["prompt"].as_str().unwrap().to_string());
    }
    prompts.sort();
    prompts.dedup();
    assert_eq!(prompts.len(), 3, "three different prompts");

    let expected = ["src/server.py", "src/config.py", "tests/test_server.py"];
    let mut results = Vec::new();
    for ((id, _, input), file) in calls.iter().zip(expected) {
        let answer = run_explore(&model, input["prompt"].as_str().unwrap(), file).await;
        results.push((id.clone(), answer));
    }

    let results_message = tool_results(
        &results
            .iter()
            .map(|(id, answer)| (id.as_str(), "task", answer.as_str()))
            .collect::<Vec<_>>(),
    );
    let history = vec![prompt, assistant_calls(&calls), results_message];
    let events = call(&model, request("build", &build_tools, history)).await;
    assert!(calls_of(&events).is_empty());
    assert_eq!(finish_of(&events), FinishReason::Stop);
    let summary = text_of(&events);
    for file in expected {
        assert!(
            summary.contains(&format!("<grep output for {file}>")),
            "{summary}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn demo_script_other_agents() {
    let model = ScriptedModel::load(ModelRef::new("scripted", "demo"), "demo").unwrap();
    let title = call(
        &model,
        request("title", &[], vec![ChatMessage::text(Role::User, "x")]),
    )
    .await;
    assert!(!text_of(&title).is_empty());
    assert!(!text_of(&title).contains("No rule"));
    // build without task: a text answer, no calls.
    let events = call(
        &model,
        request(
            "build",
            &["read"],
            vec![ChatMessage::text(Role::User, "hello")],
        ),
    )
    .await;
    assert!(calls_of(&events).is_empty());
    assert!(text_of(&events).contains("hello"));
    // explore with an unknown prompt still ends with an answer.
    let events = call(
        &model,
        request(
            "explore",
            &["glob"],
            vec![ChatMessage::text(Role::User, "what is here?")],
        ),
    )
    .await;
    assert_eq!(calls_of(&events)[0].1, "glob");
}

// ---------------------------------------------------------------------------------------------
// registry and cost

fn config(value: Value) -> Config {
    serde_json::from_value(value).unwrap()
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn registry_unknown_provider_lists_the_configured_and_known_ones() {
    let providers = Providers::new(
        &config(json!({"provider": {"openai": {"api_key": "sk"}}})),
        &env(&[]),
    )
    .unwrap();
    let err = providers
        .model(&ModelRef::new("nope", "gpt-9"))
        .err()
        .unwrap();
    assert!(matches!(err, ProviderError::UnknownProvider { .. }));
    let message = err.to_string();
    assert!(
        message.starts_with("unknown provider \"nope\": configure [provider.nope]"),
        "{message}"
    );
    assert!(
        message.contains("(known providers: openai, anthropic, "),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn registry_implicit_scripted_plays_the_demo() {
    let providers = Providers::new(&Config::default(), &env(&[])).unwrap();
    let model = providers
        .model(&ModelRef::new("scripted", "whatever"))
        .unwrap();
    assert_eq!(model.model(), &ModelRef::new("scripted", "whatever"));
    let events = call(
        model.as_ref(),
        request(
            "build",
            &["task"],
            vec![ChatMessage::text(Role::User, "go")],
        ),
    )
    .await;
    assert_eq!(calls_of(&events).len(), 3);
}

#[tokio::test]
async fn registry_configured_scripted_uses_its_script() {
    let providers = Providers::new(
        &config(json!({"provider": {"scripted": {"script": "echo"}}})),
        &env(&[]),
    )
    .unwrap();
    let model = providers.model(&ModelRef::new("scripted", "x")).unwrap();
    let events = call(
        model.as_ref(),
        request(
            "build",
            &["task"],
            vec![ChatMessage::text(Role::User, "echo me")],
        ),
    )
    .await;
    assert_eq!(text_of(&events), "echo me");
}

#[tokio::test]
async fn registry_reads_the_api_key_from_env() {
    let server = FakeOpenAi::start(|_| Response::text("hi")).await.unwrap();
    let mut f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        &format!(
            r#"
model = "local/llama-3"
[provider.local]
type = "openai"
base_url = "{}"
api_key_env = "LOCAL_KEY"
headers = {{ "X-Extra" = "1" }}
[provider.local.models."llama-3"]
context = 8192
cost = {{ input = 1.0, output = 2.0 }}

[provider.keyless]
type = "openai"
base_url = "{}"
api_key_env = "MISSING_KEY"

[provider.claude]
type = "anthropic"
"#,
            server.base_url(),
            server.base_url()
        ),
    );
    f.set_env("LOCAL_KEY", "sk-local");
    let loaded = f.load();
    let providers = Providers::new(&loaded.config, &f.env).unwrap();

    let m = ModelRef::new("local", "llama-3");
    let model = providers.model(&m).unwrap();
    assert!(Arc::ptr_eq(&model, &providers.model(&m).unwrap()));
    call(model.as_ref(), user_request("hi")).await;
    let r = &server.requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer sk-local"));
    assert_eq!(r.header("x-extra"), Some("1"));
    assert_eq!(r.body["model"], "llama-3");

    let mc = providers.model_config(&m).unwrap();
    assert_eq!(mc.context, Some(8192));
    let usage = Usage {
        input: 1_000_000,
        output: 500_000,
        ..Usage::default()
    };
    assert!((providers.cost(&m, &usage) - 2.0).abs() < 1e-9);
    assert!(
        providers
            .model_config(&ModelRef::new("local", "other"))
            .is_none()
    );

    // Any model id works on an openai provider.
    assert!(providers.model(&ModelRef::new("local", "other")).is_ok());

    // A missing key variable only fails that provider, when used.
    let err = providers
        .model(&ModelRef::new("keyless", "m"))
        .err()
        .unwrap();
    assert!(matches!(err, ProviderError::MissingKey { .. }));
    assert!(err.to_string().contains("MISSING_KEY"), "{err}");
    assert!(!providers.is_available("keyless"));

    let err = providers
        .model(&ModelRef::new("claude", "sonnet"))
        .err()
        .unwrap();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    assert!(!providers.is_available("claude"));

    assert_eq!(
        providers.ids().collect::<Vec<_>>(),
        vec![
            "local",
            "keyless",
            "claude",
            "openai",
            "anthropic",
            "openrouter",
            "groq",
            "deepseek",
            "mistral",
            "ollama",
            "lmstudio",
            "scripted"
        ]
    );
}

#[test]
fn cost_math() {
    let usage = Usage {
        input: 3_000,
        output: 1_000,
        reasoning: 200,
        cache_read: 10_000,
        cache_write: 2_000,
    };
    let price = CostConfig {
        input: 2.5,
        output: 10.0,
        cache_read: 1.25,
        cache_write: 3.75,
    };
    let expected = (3_000.0 * 2.5 + 1_000.0 * 10.0 + 10_000.0 * 1.25 + 2_000.0 * 3.75) / 1e6;
    assert!((cost(&usage, Some(&price)) - expected).abs() < 1e-12);
    assert_eq!(cost(&usage, None), 0.0);
}
