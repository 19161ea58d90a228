//! Sessions on an `anthropic` provider, end to end over real HTTP against the fake Messages API:
//! usage and cost, tool calls answered with `tool_result`, thinking, retries, context overflow.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::model::{Message, PartKind, ToolState};
use taskforce_agents::provider::Usage;
use taskforce_testkit::fake_anthropic::{
    self as fa, FAKE_SIGNATURE, FakeAnthropic, RecordedRequest, Response,
};

use super::runtime::{Env, tool_parts};

/// A project whose default model is `claude/claude-test` on the fake server.
fn env(fake: &FakeAnthropic) -> Env {
    Env::with_config(&format!(
        r#"model = "claude/claude-test"
small_model = "scripted/echo"

[provider.claude]
type = "anthropic"
base_url = "{}"
api_key = "sk-ant-test"

[provider.claude.models."claude-test"]
output = 4000
cost = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}
"#,
        fake.base_url()
    ))
}

/// A server answering with `respond(request number, request)`.
async fn server(
    respond: impl Fn(usize, &RecordedRequest) -> Response + Send + Sync + 'static,
) -> (FakeAnthropic, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let n = count.clone();
    let fake = FakeAnthropic::start(move |req| respond(n.fetch_add(1, Ordering::SeqCst), req))
        .await
        .unwrap();
    (fake, count)
}

async fn ask(rt: &Runtime, text: &str) -> MessageWithParts {
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text(text)).await.unwrap()
}

fn texts(answer: &MessageWithParts) -> Vec<&str> {
    answer
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.as_str()))
        .collect()
}

fn retries(answer: &MessageWithParts) -> Vec<u32> {
    answer
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Retry(r) => Some(r.attempt),
            _ => None,
        })
        .collect()
}

fn has_tool_result(req: &RecordedRequest) -> bool {
    req.messages().iter().any(|m| {
        m["content"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    })
}

#[actix_rt::test]
async fn a_text_answer_records_usage_and_cost() {
    let usage = Usage {
        input: 2_000,
        output: 100,
        reasoning: 0,
        cache_read: 10_000,
        cache_write: 4_000,
    };
    let (fake, count) = server(move |_, _| Response::text_with_usage("Hello there", usage)).await;
    let env = env(&fake);
    let rt = env.runtime().await;
    let answer = ask(&rt, "hi").await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let Message::Assistant(a) = &*answer.info else {
        panic!("expected the answer")
    };
    assert!(a.error.is_none(), "{:?}", a.error);
    assert_eq!(a.provider_id, "claude");
    assert_eq!(a.finish.as_deref(), Some("stop"));
    assert_eq!(texts(&answer), ["Hello there"]);
    assert_eq!(a.tokens.input, 2_000);
    assert_eq!(a.tokens.output, 100);
    assert_eq!(a.tokens.cache.read, 10_000);
    assert_eq!(a.tokens.cache.write, 4_000);
    // 2000 × 3 + 100 × 15 + 10000 × 0.3 + 4000 × 3.75, per million.
    let expected = (6_000.0 + 1_500.0 + 3_000.0 + 15_000.0) / 1_000_000.0;
    assert!((a.cost - expected).abs() < 1e-12, "cost {}", a.cost);

    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.body["model"], "claude-test");
    assert_eq!(r.body["max_tokens"], 4000);
    assert_eq!(r.body["stream"], true);
    let system = r.body["system"].as_array().unwrap();
    assert!(
        system.len() >= 2,
        "agent prompt and environment: {system:?}"
    );
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(system.last().unwrap()["cache_control"], ephemeral);
    assert!(system[0].get("cache_control").is_none());
    assert_eq!(
        r.body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": ephemeral}
        ]}])
    );
    assert!(r.tool_names().contains(&"read"));
    assert!(
        r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["input_schema"].is_object())
    );
}

#[actix_rt::test]
async fn a_tool_call_is_run_and_its_result_sent_back_as_tool_result() {
    let (fake, count) = server(|_, req| {
        if has_tool_result(req) {
            Response::text("The notes say hello.")
        } else {
            Response::tool_use(
                Some("Let me read the notes."),
                &[("toolu_01", "read", r#"{"filePath":"notes.txt"}"#)],
            )
        }
    })
    .await;
    let env = env(&fake);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .prompt(&s.id, PromptInput::text("what do the notes say?"))
        .await
        .unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(texts(&answer), ["The notes say hello."]);
    let parts = tool_parts(&rt, &s.id).await;
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].0, "read");
    let ToolState::Completed(done) = &parts[0].1 else {
        panic!("read completed: {:?}", parts[0].1)
    };
    assert!(done.output.contains("hello from the project"));

    let second = &fake.requests()[1];
    let messages = second.messages();
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    let assistant = messages[1]["content"].as_array().unwrap();
    assert_eq!(assistant[0]["type"], "text");
    assert_eq!(assistant[0]["text"], "Let me read the notes.");
    assert_eq!(assistant[1]["type"], "tool_use");
    assert_eq!(assistant[1]["id"], "toolu_01");
    assert_eq!(assistant[1]["name"], "read");
    assert_eq!(assistant[1]["input"]["filePath"], "notes.txt");
    let ephemeral = json!({"type": "ephemeral"});
    // The latest two messages carry a cache mark on their last block.
    assert_eq!(assistant[1]["cache_control"], ephemeral);
    assert!(assistant[0].get("cache_control").is_none());
    assert!(messages[0]["content"][0].get("cache_control").is_none());
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert!(
        results[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("hello from the project")),
        "{:?}",
        results[0]
    );
    assert!(results[0].get("is_error").is_none());
    assert_eq!(results[0]["cache_control"], ephemeral);
}

#[actix_rt::test]
async fn thinking_becomes_a_reasoning_part() {
    let (fake, _) = server(|_, _| Response::thinking("The user greets me. ", "Hi!")).await;
    let env = env(&fake);
    let rt = env.runtime().await;
    let answer = ask(&rt, "hello").await;
    let reasoning: Vec<&str> = answer
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Reasoning(r) => Some(r.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].trim_end(), "The user greets me.");
    let signature = answer.parts.iter().find_map(|p| match &p.kind {
        PartKind::Reasoning(r) => r.metadata.clone(),
        _ => None,
    });
    assert_eq!(
        signature.map(Value::Object),
        Some(json!({"anthropic": {"signature": FAKE_SIGNATURE}}))
    );
    assert_eq!(texts(&answer), ["Hi!"]);
    let kinds: Vec<&str> = answer.parts.iter().map(|p| p.type_name()).collect();
    assert_eq!(kinds, ["step-start", "reasoning", "text", "step-finish"]);
}

#[actix_rt::test]
async fn overloaded_and_rate_limited_calls_are_retried_then_succeed() {
    let (fake, count) = server(|i, _| match i {
        0 => Response::overloaded(),
        1 => Response::stream_error("overloaded_error", "Overloaded"),
        2 => Response::rate_limited(0),
        _ => Response::text("recovered"),
    })
    .await;
    let env = env(&fake);
    let rt = env.runtime().await;
    let answer = ask(&rt, "hi").await;
    assert_eq!(count.load(Ordering::SeqCst), 4);
    let Message::Assistant(a) = &*answer.info else {
        panic!("expected the answer")
    };
    assert!(a.error.is_none(), "{:?}", a.error);
    assert_eq!(retries(&answer), [1, 2, 3]);
    let statuses: Vec<Option<u16>> = answer
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Retry(r) => Some(r.error.status_code),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [Some(529), Some(529), Some(429)]);
    assert_eq!(texts(&answer), ["recovered"]);
}

#[actix_rt::test]
async fn a_prompt_too_long_ends_in_context_overflow_without_retry() {
    let (fake, count) = server(|_, _| Response::prompt_too_long(250_000, 200_000)).await;
    let env = env(&fake);
    let rt = env.runtime().await;
    let answer = ask(&rt, "a very long prompt").await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let Message::Assistant(a) = &*answer.info else {
        panic!("expected the answer")
    };
    let error = a.error.as_ref().expect("an error");
    assert_eq!(error.name(), "ContextOverflowError");
    let as_json: Value = serde_json::to_value(error).unwrap();
    assert!(
        as_json.to_string().contains("prompt is too long"),
        "{as_json}"
    );
    assert!(retries(&answer).is_empty());
}

#[actix_rt::test]
async fn thinking_before_a_tool_call_is_sent_back_signed() {
    let (fake, count) = server(|_, req| {
        if has_tool_result(req) {
            return Response::text("Done.");
        }
        Response::Stream(vec![
            fa::message_start(Usage::default()),
            fa::thinking_start(0),
            fa::thinking_delta(0, "I need the notes."),
            fa::signature_delta(0, "sig-abc"),
            fa::block_stop(0),
            fa::tool_use_start(1, "toolu_9", "read"),
            fa::input_json_delta(1, r#"{"filePath":"notes.txt"}"#),
            fa::block_stop(1),
            fa::message_delta("tool_use", 12),
            fa::message_stop(),
        ])
    })
    .await;
    let env = env(&fake);
    let rt = env.runtime().await;
    let answer = ask(&rt, "read the notes").await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(texts(&answer), ["Done."]);
    let second = &fake.requests()[1];
    let assistant = &second.messages()[1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "I need the notes.", "signature": "sig-abc"})
    );
    assert_eq!(assistant[1]["type"], "tool_use");
    assert_eq!(assistant[1]["id"], "toolu_9");
}
