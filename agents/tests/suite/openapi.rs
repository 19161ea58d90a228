//! The OpenAPI schemas tell the truth: every sample and every value the crate serializes
//! validates against its component schema, and wrong values do not.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::command::{CommandInfo, Commands};
use taskforce_agents::model::{
    AssistantError, FileDiff, Message, ModelRef, OutputFormat, Part, Session, Todo, ToolState,
    UserMessage,
};
use taskforce_agents::permission::Rule;
use utoipa::OpenApi;

use super::fixture::Fixture;

/// The schemas the server names; everything they reference is collected with them.
#[derive(OpenApi)]
#[openapi(components(schemas(
    Session,
    Message,
    Part,
    ToolState,
    AssistantError,
    Todo,
    ModelRef,
    FileDiff,
    OutputFormat,
    Rule,
    AgentInfo,
    CommandInfo
)))]
struct Doc;

/// The generated document as JSON.
fn document() -> Value {
    serde_json::to_value(Doc::openapi()).unwrap()
}

/// A validator for the component `name`, with every component reachable through `$ref`.
fn validator(doc: &Value, name: &str) -> jsonschema::Validator {
    assert!(
        doc["components"]["schemas"].get(name).is_some(),
        "no component schema named {name}"
    );
    let schema = json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": doc["components"].clone(),
    });
    jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("the schema of {name} does not compile: {e}"))
}

/// Asserts `value` validates against the component `name`, listing every violation if not.
fn assert_valid(doc: &Value, name: &str, value: &Value) {
    let validator = validator(doc, name);
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name} rejects a real value:\n{}\nvalue: {value:#}",
        errors.join("\n")
    );
}

/// Asserts `value` does not validate against the component `name`.
fn assert_invalid(doc: &Value, name: &str, value: &Value) {
    assert!(
        !validator(doc, name).is_valid(value),
        "{name} accepts a wrong value: {value:#}"
    );
}

/// Every `$ref` in `value`.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// Parses a sample, then checks both the sample and the typed value serialized again.
fn check_sample<T: Serialize + DeserializeOwned>(doc: &Value, name: &str, text: &str) -> usize {
    let json: Value = serde_json::from_str(text).unwrap();
    let items = match json {
        Value::Array(items) => items,
        one => vec![one],
    };
    for item in &items {
        assert_valid(doc, name, item);
        let typed: T = serde_json::from_value(item.clone()).unwrap();
        assert_valid(doc, name, &serde_json::to_value(&typed).unwrap());
    }
    items.len()
}

#[test]
fn openapi_every_ref_resolves() {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected $ref {r}"));
        assert!(schemas.contains_key(name), "dangling $ref {r}");
    }
    // Types reached only through other types are collected too.
    for name in [
        "SessionId",
        "MessageId",
        "PartId",
        "PartKind",
        "TextPart",
        "ToolStateCompleted",
        "ApiError",
        "NamedApiError",
        "AgentMode",
        "CommandSource",
    ] {
        assert!(schemas.contains_key(name), "{name} is not collected");
    }
}

#[test]
fn openapi_samples_validate() {
    let doc = document();
    let samples: [(&str, usize); 9] = [
        (
            "Session",
            check_sample::<Session>(
                &doc,
                "Session",
                include_str!("../samples/session_root.json"),
            ),
        ),
        (
            "Session",
            check_sample::<Session>(
                &doc,
                "Session",
                include_str!("../samples/session_child.json"),
            ),
        ),
        (
            "Message",
            check_sample::<Message>(
                &doc,
                "Message",
                include_str!("../samples/message_user.json"),
            ),
        ),
        (
            "Message",
            check_sample::<Message>(
                &doc,
                "Message",
                include_str!("../samples/message_assistant.json"),
            ),
        ),
        (
            "Message",
            check_sample::<Message>(
                &doc,
                "Message",
                include_str!("../samples/message_assistant_minimal.json"),
            ),
        ),
        (
            "Part",
            check_sample::<Part>(&doc, "Part", include_str!("../samples/parts.json")),
        ),
        (
            "ToolState",
            check_sample::<ToolState>(
                &doc,
                "ToolState",
                include_str!("../samples/tool_states.json"),
            ),
        ),
        (
            "AssistantError",
            check_sample::<AssistantError>(
                &doc,
                "AssistantError",
                include_str!("../samples/errors.json"),
            ),
        ),
        (
            "Todo",
            check_sample::<Todo>(&doc, "Todo", include_str!("../samples/todos.json")),
        ),
    ];
    for (name, count) in samples {
        assert!(count > 0, "no sample checked for {name}");
    }
}

#[test]
fn openapi_constructed_values_validate() {
    let doc = document();
    let root = Session::new("proj", "/srv/p", "New session", 1_000);
    let user = UserMessage::new(
        root.id.clone(),
        "build",
        ModelRef::new("openai", "gpt-4"),
        2,
    );
    assert_valid(&doc, "Session", &serde_json::to_value(&root).unwrap());
    assert_valid(
        &doc,
        "Message",
        &serde_json::to_value(Message::from(user)).unwrap(),
    );
    for format in [
        json!({"type": "text"}),
        json!({"type": "json_schema", "schema": {"type": "object"}, "retryCount": 3}),
    ] {
        let typed: OutputFormat = serde_json::from_value(format).unwrap();
        assert_valid(&doc, "OutputFormat", &serde_json::to_value(&typed).unwrap());
    }
    // A completed tool state carrying a file part: the schema recursion Part → ToolState → Part.
    let mut state: Value = json!({
        "status": "completed", "input": {}, "output": "", "title": "t", "metadata": {},
        "time": {"start": 1, "end": 2},
        "attachments": [{
            "id": "prt_1", "sessionID": "ses_1", "messageID": "msg_1",
            "type": "file", "mime": "image/png", "url": "data:image/png;base64,AA=="
        }]
    });
    let typed: ToolState = serde_json::from_value(state.clone()).unwrap();
    assert_valid(&doc, "ToolState", &serde_json::to_value(&typed).unwrap());
    state["attachments"][0]["type"] = json!("hologram");
    assert_invalid(&doc, "ToolState", &state);
}

#[test]
fn openapi_agents_and_commands_validate() {
    let doc = document();
    let f = Fixture::new();
    f.project_file(
        "taskforce.toml",
        "[provider.openai]\n[agent.reviewer]\ndescription = \"Reviews\"\nmode = \"subagent\"\nmodel = \"openai/gpt-4\"\n\
         temperature = 0.5\ntop_p = 0.9\ncolor = \"#ff0000\"\nsteps = 7\nvariant = \"high\"\n\
         options = { reasoningEffort = \"high\" }\n\
         [command.greet]\ntemplate = \"Say hello to $1\"\ndescription = \"Greets\"\n\
         agent = \"reviewer\"\nmodel = \"openai/gpt-4\"\nsubtask = true\n",
    );
    // What `taskforce agents list --json` prints.
    let registry = f.registry();
    let agents: Vec<&AgentInfo> = registry.list().collect();
    assert!(agents.iter().any(|a| a.name == "reviewer"));
    for agent in agents {
        assert_valid(&doc, "AgentInfo", &serde_json::to_value(agent).unwrap());
    }
    // What `taskforce commands list --json` prints.
    let commands = Commands::new(&f.load().config);
    let mut count = 0;
    for command in commands.list() {
        assert_valid(&doc, "CommandInfo", &serde_json::to_value(command).unwrap());
        count += 1;
    }
    assert!(count >= 2, "{count} commands");
    let rule = Rule::new("bash", "git *", taskforce_agents::permission::Action::Ask);
    assert_valid(&doc, "Rule", &serde_json::to_value(rule).unwrap());
}

#[test]
fn openapi_schemas_reject_wrong_values() {
    let doc = document();
    let part: Value = serde_json::from_str::<Vec<Value>>(include_str!("../samples/parts.json"))
        .unwrap()
        .remove(0);
    let mut unknown_type = part.clone();
    unknown_type["type"] = json!("hologram");
    assert_invalid(&doc, "Part", &unknown_type);
    let mut no_message = part.clone();
    no_message.as_object_mut().unwrap().remove("messageID");
    assert_invalid(&doc, "Part", &no_message);
    let mut bad_prefix = part;
    bad_prefix["id"] = json!("msg_01JABC");
    assert_invalid(&doc, "Part", &bad_prefix);

    let session: Value =
        serde_json::from_str(include_str!("../samples/session_child.json")).unwrap();
    let mut no_id = session.clone();
    no_id.as_object_mut().unwrap().remove("id");
    assert_invalid(&doc, "Session", &no_id);
    let mut bad_parent = session.clone();
    bad_parent["parentID"] = json!("msg_01JABC");
    assert_invalid(&doc, "Session", &bad_parent);
    let mut bad_rule = session;
    bad_rule["permission"][0]["action"] = json!("maybe");
    assert_invalid(&doc, "Session", &bad_rule);

    assert_invalid(&doc, "Message", &json!({"role": "system", "id": "msg_1"}));
    assert_invalid(&doc, "ToolState", &json!({"status": "paused", "input": {}}));
    assert_invalid(
        &doc,
        "AssistantError",
        &json!({"name": "TeapotError", "data": {"message": "short and stout"}}),
    );
    assert_invalid(
        &doc,
        "AssistantError",
        &json!({"name": "APIError", "data": {"message": "no isRetryable"}}),
    );
    assert_invalid(
        &doc,
        "Todo",
        &json!({"content": "x", "status": "done", "priority": "high", "id": "1"}),
    );
    // A retry part's error is the named APIError, not any assistant error.
    let mut retry: Value =
        serde_json::from_str::<Vec<Value>>(include_str!("../samples/parts.json"))
            .unwrap()
            .into_iter()
            .find(|p| p["type"] == "retry")
            .unwrap();
    retry["error"] = json!({"name": "UnknownError", "data": {"message": "x"}});
    assert_invalid(&doc, "Part", &retry);
}
