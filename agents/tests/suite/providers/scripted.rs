//! The scripted model: rules matched in order, delays, the missing fallback, word chunks with
//! usage, unique tool call ids, and scripts read from a file.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::{
    ChatMessage, FinishReason, LanguageModel, ModelEvent, Role, Script, ScriptedModel,
};

use super::{assistant_calls, call, calls_of, finish_of, request, text_of, tool_results};

fn scripted(script: &str) -> ScriptedModel {
    ScriptedModel::new(
        ModelRef::new("scripted", "test"),
        Arc::new(Script::from_json("test", script).unwrap()),
    )
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
