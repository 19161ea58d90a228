//! The OpenAPI schemas of the runtime's types tell the truth: every bus event, a real run's
//! events, tree and messages, a real permission ask and an OpenCode prompt validate against
//! their component schemas, and wrong values do not.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use taskforce_actors::bus::{BusItem, Event, Filter, SessionStatus, Subscription, ToastVariant};
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_actors::question::{QuestionInfo, QuestionOption, QuestionRequest};
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PartInput, PromptInput, SessionTree};
use taskforce_agents::id::{MessageId, PartId, PermissionId, QuestionId, SessionId};
use taskforce_agents::model::{
    AssistantError, FileDiff, FileDiffStatus, Message, ModelRef, Part, Session, TextPart, Todo,
    TodoPriority, UserMessage,
};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::script::{call_then, delegating};
use utoipa::OpenApi;

use super::runtime::Env;

/// The schemas the server names; everything they reference is collected with them.
#[derive(OpenApi)]
#[openapi(components(schemas(
    Event,
    SessionStatus,
    PermissionRequest,
    PermissionReply,
    MessageWithParts,
    SessionTree,
    PromptInput,
    PartInput
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

/// The variant's name; an exhaustive match, so a new variant must be added to the test.
fn variant(event: &Event) -> &'static str {
    match event {
        Event::SessionCreated { .. }
        | Event::SessionUpdated { .. }
        | Event::SessionDeleted { .. }
        | Event::SessionStatus { .. }
        | Event::SessionIdle { .. }
        | Event::SessionCompacted { .. }
        | Event::SessionError { .. }
        | Event::MessageUpdated { .. }
        | Event::MessageRemoved { .. }
        | Event::PartUpdated { .. }
        | Event::PartDelta { .. }
        | Event::PartRemoved { .. }
        | Event::PermissionAsked(_)
        | Event::PermissionReplied { .. }
        | Event::CommandExecuted { .. }
        | Event::SessionDiff { .. }
        | Event::TuiPromptAppend { .. }
        | Event::TuiCommandExecute { .. }
        | Event::TuiToastShow { .. }
        | Event::TuiSessionSelect { .. }
        | Event::QuestionAsked(_)
        | Event::QuestionReplied { .. }
        | Event::QuestionRejected { .. }
        | Event::McpToolsChanged { .. }
        | Event::TodoUpdated { .. } => event.type_name(),
    }
}

/// A permission request as the broker builds it, read from JSON so it needs no field list.
fn permission_request(session: &SessionId) -> PermissionRequest {
    serde_json::from_value(json!({
        "id": PermissionId::new(),
        "sessionID": session,
        "permission": "bash",
        "patterns": ["git status"],
        "metadata": {"command": "git status"},
        "always": ["git status *"],
        "tool": {"messageID": MessageId::new(), "callID": "call_1"},
        "rootSessionID": session,
        "path": ["build"]
    }))
    .unwrap()
}

/// One event of every variant.
fn every_event() -> Vec<Event> {
    let root = Session::new("proj", "/srv/p", "root", 1);
    let child = Session::child_of(&root, "child", 2);
    let user = UserMessage::new(
        child.id.clone(),
        "build",
        ModelRef::new("openai", "gpt-4"),
        3,
    );
    let part = Part::new(child.id.clone(), user.id.clone(), TextPart::new("hi"));
    vec![
        Event::SessionCreated {
            info: std::sync::Arc::new(root.clone()),
        },
        Event::SessionUpdated {
            info: std::sync::Arc::new(child.clone()),
        },
        Event::SessionDeleted {
            info: std::sync::Arc::new(child.clone()),
        },
        Event::SessionStatus {
            session_id: root.id.clone(),
            status: SessionStatus::Idle,
        },
        Event::SessionStatus {
            session_id: root.id.clone(),
            status: SessionStatus::Busy,
        },
        Event::SessionStatus {
            session_id: root.id.clone(),
            status: SessionStatus::Retry {
                attempt: 2,
                message: "Overloaded".into(),
                next: 1_736_935_204_000,
            },
        },
        Event::SessionIdle {
            session_id: root.id.clone(),
        },
        Event::SessionCompacted {
            session_id: root.id.clone(),
        },
        Event::SessionError {
            session_id: Some(root.id.clone()),
            error: Some(Box::new(AssistantError::aborted(
                "The operation was aborted.",
            ))),
        },
        Event::SessionError {
            session_id: None,
            error: None,
        },
        Event::MessageUpdated {
            info: Message::from(user.clone()).into(),
        },
        Event::MessageRemoved {
            session_id: child.id.clone(),
            message_id: user.id.clone(),
        },
        Event::PartUpdated {
            part: part.clone().into(),
        },
        Event::PartDelta {
            session_id: child.id.clone(),
            message_id: user.id.clone(),
            part_id: part.id.clone(),
            field: "text".into(),
            delta: "hi".into(),
        },
        Event::PartRemoved {
            session_id: child.id.clone(),
            message_id: user.id.clone(),
            part_id: PartId::new(),
        },
        Event::PermissionAsked(Box::new(permission_request(&child.id))),
        Event::PermissionReplied {
            session_id: child.id.clone(),
            request_id: PermissionId::new(),
            reply: PermissionReply::Always,
        },
        Event::CommandExecuted {
            name: "review".into(),
            session_id: root.id.clone(),
            arguments: "main".into(),
            message_id: user.id,
        },
        Event::SessionDiff {
            session_id: root.id.clone(),
            diff: vec![FileDiff {
                file: "src/a.rs".into(),
                before: "a\n".into(),
                after: "b\n".into(),
                additions: 1,
                deletions: 1,
                status: Some(FileDiffStatus::Modified),
            }],
        },
        Event::QuestionAsked(Box::new(QuestionRequest {
            id: QuestionId::new(),
            session_id: child.id.clone(),
            questions: vec![QuestionInfo {
                question: "Which color?".into(),
                header: "Color".into(),
                options: vec![QuestionOption {
                    label: "Red".into(),
                    description: "warm".into(),
                }],
                multiple: Some(false),
                custom: None,
            }],
            tool: None,
            root_session_id: root.id.clone(),
            path: vec!["build".into(), "general".into()],
        })),
        Event::QuestionReplied {
            session_id: child.id.clone(),
            request_id: QuestionId::new(),
            answers: vec![vec!["Red".into()]],
        },
        Event::QuestionRejected {
            session_id: child.id.clone(),
            request_id: QuestionId::new(),
        },
        Event::TuiPromptAppend {
            text: "fix the bug".into(),
        },
        Event::TuiCommandExecute {
            command: "prompt.submit".into(),
        },
        Event::TuiToastShow {
            title: None,
            message: "saved".into(),
            variant: ToastVariant::Success,
            duration: Some(3000),
        },
        Event::TuiSessionSelect {
            session_id: root.id.clone(),
        },
        Event::McpToolsChanged {
            server: "docs".into(),
        },
        Event::TodoUpdated {
            session_id: root.id,
            todos: vec![Todo::new("1", "Write the schema", TodoPriority::High)],
        },
    ]
}

/// The events on `sub` up to and including the first that `last` accepts.
async fn events_until(sub: &mut Subscription, last: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), sub.next()).await {
            Ok(Some(BusItem::Event(envelope))) => {
                let event = envelope.event.clone();
                let done = last(&event);
                seen.push(event);
                if done {
                    return seen;
                }
            }
            other => panic!("expected an event after {seen:?}, got {other:?}"),
        }
    }
}

/// Validates every event, and `permission.asked` properties as a `PermissionRequest` too.
fn assert_events_valid(doc: &Value, events: &[Event]) {
    for event in events {
        let json = serde_json::to_value(event).unwrap();
        assert_valid(doc, "Event", &json);
        if let Event::PermissionAsked(_) = event {
            assert_valid(doc, "PermissionRequest", &json["properties"]);
        }
    }
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
    for name in ["Session", "Message", "Part", "ToolState", "ToolRef", "Todo"] {
        assert!(schemas.contains_key(name), "{name} is not collected");
    }
}

#[test]
fn openapi_every_event_variant_validates() {
    let doc = document();
    let events = every_event();
    let names: BTreeSet<&str> = events.iter().map(variant).collect();
    assert_eq!(names.len(), 25, "an event of each variant: {names:?}");
    // The schema lists each variant once: an object with a `type` const and `properties`.
    let variants = doc["components"]["schemas"]["Event"]["oneOf"]
        .as_array()
        .unwrap();
    assert_eq!(variants.len(), names.len());
    let schema_names: BTreeSet<&str> = variants
        .iter()
        .map(|v| {
            assert_eq!(v["type"], "object");
            let required = v["required"].as_array().unwrap();
            assert!(required.contains(&json!("type")) && required.contains(&json!("properties")));
            v["properties"]["type"]["enum"][0].as_str().unwrap()
        })
        .collect();
    assert_eq!(schema_names, names);
    assert_events_valid(&doc, &events);
    for status in [
        SessionStatus::Idle,
        SessionStatus::Busy,
        SessionStatus::Retry {
            attempt: 1,
            message: "m".into(),
            next: 5,
        },
    ] {
        assert_valid(
            &doc,
            "SessionStatus",
            &serde_json::to_value(status).unwrap(),
        );
    }
    for reply in [
        PermissionReply::Once,
        PermissionReply::Always,
        PermissionReply::Reject,
    ] {
        assert_valid(
            &doc,
            "PermissionReply",
            &serde_json::to_value(reply).unwrap(),
        );
    }
}

#[actix_rt::test]
async fn openapi_a_delegating_run_validates() {
    let doc = document();
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Look around","prompt":"List the files","subagent_type":"general"}"#,
        "The project has one file: notes.txt.",
        "Done.",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let mut sub = rt.subscribe(Filter::All);
    let parent = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .prompt(&parent.id, PromptInput::text("What is here?"))
        .await
        .unwrap();
    assert_valid(
        &doc,
        "MessageWithParts",
        &serde_json::to_value(&answer).unwrap(),
    );

    let events = events_until(
        &mut sub,
        |e| matches!(e, Event::SessionIdle { session_id } if *session_id == parent.id),
    )
    .await;
    let types: BTreeSet<&str> = events.iter().map(Event::type_name).collect();
    for expected in [
        "session.created",
        "session.updated",
        "session.status",
        "session.idle",
        "message.updated",
        "message.part.updated",
        "message.part.delta",
    ] {
        assert!(types.contains(expected), "no {expected} in {types:?}");
    }
    assert_events_valid(&doc, &events);

    let tree = rt.tree(&parent.id).await.unwrap();
    assert_eq!(tree.children.len(), 1, "the tree has the child");
    assert_valid(&doc, "SessionTree", &serde_json::to_value(&tree).unwrap());
    for session in [&parent.id, &tree.children[0].info.id] {
        let messages = rt.messages(session).await.unwrap();
        assert!(messages.len() >= 2);
        for message in messages {
            assert_valid(
                &doc,
                "MessageWithParts",
                &serde_json::to_value(&message).unwrap(),
            );
        }
    }
}

#[actix_rt::test]
async fn openapi_a_permission_ask_validates() {
    let doc = document();
    let fake = FakeOpenAi::start(call_then(
        Response::tool_calls(&[(
            "call_bash_1",
            "bash",
            r#"{"command":"echo hi","description":"Say hi"}"#,
        )]),
        "Refused, as asked.",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "\n[permission]\nbash = \"ask\"\n");
    let rt = env.runtime().await;
    let mut sub = rt.subscribe(Filter::All);
    let session = rt.create_session(None, None).await.unwrap();
    rt.prompt_async(&session.id, PromptInput::text("Say hi"))
        .await
        .unwrap();
    let mut events = events_until(&mut sub, |e| matches!(e, Event::PermissionAsked(_))).await;
    let pending = rt.pending_permissions().await;
    assert_eq!(pending.len(), 1);
    assert!(pending[0].tool.is_some(), "a tool's ask names its call");
    assert_valid(
        &doc,
        "PermissionRequest",
        &serde_json::to_value(&pending[0]).unwrap(),
    );
    assert!(
        rt.reply_permission(&pending[0].id, PermissionReply::Reject, None)
            .await
    );
    events.extend(
        events_until(
            &mut sub,
            |e| matches!(e, Event::SessionIdle { session_id } if *session_id == session.id),
        )
        .await,
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::PermissionReplied { .. }))
    );
    assert_events_valid(&doc, &events);
}

#[test]
fn openapi_prompt_input_from_opencode_json() {
    let doc = document();
    // A body as OpenCode clients send it; fields taskforce ignores are allowed too.
    let body = json!({
        "messageID": "msg_01JCX8ZR0000000000000000AB",
        "model": {"providerID": "openai", "modelID": "gpt-4o-mini"},
        "agent": "build",
        "noReply": false,
        "tools": {"bash": false, "read": true},
        "system": "Be brief.",
        "parts": [
            {"id": "prt_01JCX8ZS000000000000000001", "type": "text", "text": "Look at this"},
            {"type": "text", "text": "(added by a client)", "synthetic": true},
            {"type": "file", "mime": "text/plain", "filename": "notes.txt", "url": "file:///srv/p/notes.txt"},
            {"type": "agent", "name": "explore", "source": {"value": "@explore", "start": 0, "end": 8}},
            {"type": "subtask", "prompt": "Review main", "description": "Review", "agent": "general",
             "model": {"providerID": "openai", "modelID": "gpt-4o"}, "command": "review"}
        ]
    });
    assert_valid(&doc, "PromptInput", &body);
    let input: PromptInput = serde_json::from_value(body).unwrap();
    assert_eq!(input.parts.len(), 5);
    assert_valid(&doc, "PromptInput", &serde_json::to_value(&input).unwrap());
    for part in &input.parts {
        assert_valid(&doc, "PartInput", &serde_json::to_value(part).unwrap());
    }
    let minimal = PromptInput::text("hi");
    assert_valid(
        &doc,
        "PromptInput",
        &serde_json::to_value(&minimal).unwrap(),
    );
}

#[test]
fn openapi_schemas_reject_wrong_values() {
    let doc = document();
    let session = SessionId::new();
    assert_invalid(
        &doc,
        "Event",
        &json!({"type": "session.exploded", "properties": {"sessionID": session}}),
    );
    assert_invalid(
        &doc,
        "Event",
        &json!({"type": "session.idle", "properties": {}}),
    );
    assert_invalid(
        &doc,
        "Event",
        &json!({"type": "session.idle", "sessionID": session}),
    );
    assert_invalid(
        &doc,
        "Event",
        &json!({"type": "session.status", "properties": {"sessionID": session, "status": {"type": "asleep"}}}),
    );
    assert_invalid(
        &doc,
        "SessionStatus",
        &json!({"type": "retry", "attempt": 1}),
    );
    assert_invalid(&doc, "PermissionReply", &json!("maybe"));

    let mut request = serde_json::to_value(permission_request(&session)).unwrap();
    assert_valid(&doc, "PermissionRequest", &request);
    request["id"] = json!("ses_01JABC");
    assert_invalid(&doc, "PermissionRequest", &request);

    assert_invalid(
        &doc,
        "PromptInput",
        &json!({"parts": [{"type": "image", "url": "x"}]}),
    );
    assert_invalid(&doc, "PromptInput", &json!({"parts": [{"type": "text"}]}));
    assert_invalid(&doc, "PromptInput", &json!({"agent": "build"}));

    let root = Session::new("proj", "/srv/p", "root", 1);
    let mut tree = json!({
        "info": root,
        "status": {"type": "idle"},
        "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": 0.5, "turns": 1},
        "totalUsage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": 0.5, "turns": 1},
        "children": []
    });
    assert_valid(&doc, "SessionTree", &tree);
    let nested = tree.clone();
    tree["children"] = json!([nested]);
    assert_valid(&doc, "SessionTree", &tree);
    tree["children"][0]
        .as_object_mut()
        .unwrap()
        .remove("totalUsage");
    assert_invalid(&doc, "SessionTree", &tree);
}
