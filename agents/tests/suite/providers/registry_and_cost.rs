//! The provider registry (unknown providers, the scripted provider, API keys from the
//! environment) and the cost of a step's usage.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use taskforce_agents::config::{Config, CostConfig};
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::{ChatMessage, ProviderError, Providers, Role, Usage, cost};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};

use super::{call, calls_of, request, text_of, user_request};
use crate::suite::fixture::Fixture;

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
