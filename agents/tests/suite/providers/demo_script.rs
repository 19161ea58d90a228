//! The built-in demo script: the build and explore agents' walk through the tools, and the
//! answers of the other agents.

use serde_json::Value;
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::{ChatMessage, FinishReason, Role, ScriptedModel};

use super::{assistant_calls, call, calls_of, finish_of, request, text_of, tool_results};

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
