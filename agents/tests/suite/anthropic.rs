//! The Anthropic adapter over real HTTP against the fake Messages API server, and its
//! configuration through the provider registry.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::{
    AnthropicModel, AnthropicProvider, AnthropicSettings, ChatMessage, FinishReason, LanguageModel,
    ModelEvent, ModelRequest, ModelStream, ProviderError, Providers, Role, ToolSpec, Usage,
};
use taskforce_testkit::fake_anthropic::{self as fa, FakeAnthropic, Response};

use super::fixture::Fixture;

fn model(server: &FakeAnthropic) -> AnthropicModel {
    model_at(server.base_url())
}

fn model_at(base_url: String) -> AnthropicModel {
    let provider = AnthropicProvider::new(
        "claude",
        AnthropicSettings {
            base_url,
            api_key: Some("sk-ant-test".into()),
            headers: [("anthropic-beta".to_string(), "test-beta".to_string())]
                .into_iter()
                .collect(),
        },
    )
    .unwrap();
    AnthropicModel::new(Arc::new(provider), "claude-test")
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        model: "claude-test".into(),
        agent: "build".into(),
        system: vec!["You are a test.".into()],
        messages: vec![ChatMessage::text(Role::User, text)],
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"filePath": {"type": "string"}}})
                .into(),
        }]
        .into(),
        ..ModelRequest::default()
    }
}

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

fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streams_text_with_usage_and_sends_the_anthropic_headers() {
    let server = FakeAnthropic::queue(vec![Response::text_with_usage(
        "Hello from Claude",
        Usage {
            input: 120,
            output: 3,
            reasoning: 0,
            cache_read: 1000,
            cache_write: 50,
        },
    )])
    .await
    .unwrap();
    let (events, error) = drain(model(&server).stream(&request("hi")).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "Hello from Claude");
    assert_eq!(
        &events[events.len() - 2..],
        [
            ModelEvent::Usage(Usage {
                input: 120,
                output: 3,
                reasoning: 0,
                cache_read: 1000,
                cache_write: 50,
            }),
            ModelEvent::Finish(FinishReason::Stop),
        ]
    );
    let r = &server.requests()[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("anthropic-beta"), Some("test-beta"));
    assert!(r.header("authorization").is_none());
    assert_eq!(r.body["model"], "claude-test");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["max_tokens"], 8192);
    assert_eq!(
        r.body["system"],
        json!([{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(r.tool_names(), ["read"]);
    assert_eq!(r.body["tools"][0]["input_schema"]["type"], "object");
}

#[tokio::test]
async fn tool_use_and_thinking_become_events() {
    let server = FakeAnthropic::queue(vec![
        Response::tool_use(
            Some("Let me read."),
            &[("toolu_1", "read", "{\"filePath\":\"a.txt\"}")],
        ),
        Response::thinking("I should answer politely.", "Done."),
    ])
    .await
    .unwrap();
    let m = model(&server);
    let (events, error) = drain(m.stream(&request("read a.txt")).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert!(events.contains(&ModelEvent::ToolCallStart {
        id: "toolu_1".into(),
        name: "read".into()
    }));
    assert!(events.contains(&ModelEvent::ToolCall {
        id: "toolu_1".into(),
        name: "read".into(),
        arguments: "{\"filePath\":\"a.txt\"}".into()
    }));
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish(FinishReason::ToolCalls))
    );

    let (events, _) = drain(m.stream(&request("think")).await.unwrap()).await;
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ReasoningDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "I should answer politely.");
    assert_eq!(text_of(&events), "Done.");
}

#[tokio::test]
async fn errors_are_typed() {
    let server = FakeAnthropic::queue(vec![
        Response::overloaded(),
        Response::rate_limited(7),
        Response::prompt_too_long(250_000, 200_000),
        Response::error(401, "authentication_error", "invalid x-api-key"),
        Response::stream_error("overloaded_error", "Overloaded"),
        Response::text("never finished").cut_after(4),
    ])
    .await
    .unwrap();
    let m = model(&server);
    let e = m.stream(&request("a")).await.err().unwrap();
    assert!(matches!(e, ProviderError::Http { status: 529, .. }));
    assert!(e.is_retryable());
    let e = m.stream(&request("a")).await.err().unwrap();
    assert!(matches!(
        e,
        ProviderError::Http { status: 429, retry_after: Some(d), .. } if d == Duration::from_secs(7)
    ));
    let e = m.stream(&request("a")).await.err().unwrap();
    assert!(
        matches!(&e, ProviderError::ContextOverflow { message } if message.contains("prompt is too long"))
    );
    assert!(!e.is_retryable());
    let e = m.stream(&request("a")).await.err().unwrap();
    assert!(matches!(e, ProviderError::Auth { .. }));
    let (_, e) = drain(m.stream(&request("a")).await.unwrap()).await;
    assert!(matches!(e, Some(ProviderError::Http { status: 529, .. })));
    let (events, e) = drain(m.stream(&request("a")).await.unwrap()).await;
    assert!(
        matches!(e, Some(ProviderError::StreamCut { .. })),
        "{e:?} after {events:?}"
    );
    assert!(e.is_some_and(|e| e.is_retryable()));
}

#[tokio::test]
async fn connection_refused_is_retryable() {
    // A port that was just listened on and is closed now: connecting is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let m = model_at(format!("http://{addr}"));
    let e = m.stream(&request("a")).await.err().unwrap();
    assert!(matches!(e, ProviderError::Connection { .. }), "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn registry_builds_anthropic_providers_from_config() {
    let server = FakeAnthropic::queue(vec![Response::text("configured")])
        .await
        .unwrap();
    let mut f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        &format!(
            r#"
model = "claude/claude-test"
[provider.claude]
type = "anthropic"
base_url = "{}"
api_key_env = "CLAUDE_KEY"
headers = {{ "anthropic-beta" = "b1" }}
[provider.claude.models."claude-test"]
output = 2000
cost = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}

[provider.anthropic]
"#,
            server.base_url()
        ),
    );
    f.set_env("CLAUDE_KEY", "sk-from-env");
    let loaded = f.load();
    let providers = Providers::new(&loaded.config, &f.env).unwrap();
    assert!(providers.is_available("claude"));

    let m = ModelRef::new("claude", "claude-test");
    let model = providers.model(&m).unwrap();
    assert_eq!(model.model(), &m);
    let mut req = request("hi");
    req.max_output_tokens = providers.model_config(&m).and_then(|c| c.output);
    let (events, error) = drain(model.stream(&req).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "configured");
    let r = &server.requests()[0];
    assert_eq!(r.header("x-api-key"), Some("sk-from-env"));
    assert_eq!(r.header("anthropic-beta"), Some("b1"));
    assert_eq!(r.body["max_tokens"], 2000);

    let usage = Usage {
        input: 1_000_000,
        output: 1_000_000,
        reasoning: 0,
        cache_read: 1_000_000,
        cache_write: 1_000_000,
    };
    assert!((providers.cost(&m, &usage) - (3.0 + 15.0 + 0.3 + 3.75)).abs() < 1e-9);

    // `[provider.anthropic]` implies the type; without ANTHROPIC_API_KEY it fails when used.
    assert!(!providers.is_available("anthropic"));
    let err = providers
        .model(&ModelRef::new("anthropic", "claude-sonnet-4-5"))
        .err()
        .unwrap();
    assert!(matches!(err, ProviderError::MissingKey { .. }));
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
}

#[tokio::test]
async fn hand_built_frames_two_tool_calls_and_a_length_stop() {
    let frames = vec![
        fa::message_start(Usage {
            input: 5,
            ..Usage::default()
        }),
        fa::ping(),
        fa::tool_use_start(0, "toolu_a", "read"),
        fa::input_json_delta(0, "{\"filePath\":"),
        fa::tool_use_start(1, "toolu_b", "glob"),
        fa::input_json_delta(1, "{\"pattern\":\"*\"}"),
        fa::input_json_delta(0, "\"b.txt\"}"),
        fa::block_stop(1),
        fa::block_stop(0),
        fa::message_delta("max_tokens", 9),
        fa::message_stop(),
    ];
    let server = FakeAnthropic::queue(vec![Response::Stream(frames)])
        .await
        .unwrap();
    let (events, error) = drain(model(&server).stream(&request("x")).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall { id, arguments, .. } => Some((id.as_str(), arguments.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_b", "{\"pattern\":\"*\"}"),
            ("toolu_a", "{\"filePath\":\"b.txt\"}")
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish(FinishReason::Length))
    );
}
