//! Model providers: the OpenAI-compatible adapter over real HTTP against the fake server, the
//! scripted model and its built-in scripts, the provider registry, cost.
//!
//! Shared here: building requests and models, and reading the events of a stream.

mod demo_script;
mod openai_failures;
mod openai_streams;
mod registry_and_cost;
mod scripted;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use taskforce_agents::provider::{
    ChatMessage, Content, FinishReason, LanguageModel, ModelEvent, ModelRequest, ModelStream,
    OpenAiModel, OpenAiProvider, OpenAiSettings, ProviderError, Role, ToolSpec,
};
use taskforce_testkit::fake_openai::FakeOpenAi;

const WAIT: Duration = Duration::from_secs(10);

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
