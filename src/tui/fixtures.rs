//! Sessions, messages and parts as a server sends them, for the TUI's tests.

use std::sync::Arc;

use serde_json::{Value, json};
use taskforce_actors::bus::Event;
use taskforce_agents::model::{Message, Part, Session};

/// A session `id` under `parent`, created after every fixture session made before it.
pub fn session(id: &str, parent: Option<&str>, title: &str) -> Session {
    static CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let created = CLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut value = json!({
        "id": id, "slug": "s", "projectID": "p", "directory": "/p", "title": title,
        "version": "0", "time": {"created": created, "updated": created}
    });
    if let Some(parent) = parent {
        value["parentID"] = json!(parent);
    }
    serde_json::from_value(value).unwrap_or_else(|e| panic!("session fixture: {e}"))
}

/// A user message.
pub fn user(session: &str, id: &str) -> Message {
    serde_json::from_value(json!({
        "role": "user", "id": id, "sessionID": session, "time": {"created": 1},
        "agent": "build", "model": {"providerID": "p", "modelID": "m"}
    }))
    .unwrap_or_else(|e| panic!("user fixture: {e}"))
}

/// An assistant message of `agent` costing `cost`.
pub fn assistant(session: &str, id: &str, agent: &str, cost: f64) -> Message {
    serde_json::from_value(json!({
        "role": "assistant", "id": id, "sessionID": session, "time": {"created": 1},
        "parentID": "msg_0", "modelID": "m", "providerID": "p", "mode": agent, "agent": agent,
        "path": {"cwd": "/p", "root": "/p"}, "cost": cost,
        "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    }))
    .unwrap_or_else(|e| panic!("assistant fixture: {e}"))
}

/// A part of message `message` in `session` with `content` (its `type` and fields).
pub fn part(session: &str, message: &str, id: &str, content: Value) -> Part {
    let mut value = json!({"id": id, "sessionID": session, "messageID": message});
    if let (Some(target), Some(fields)) = (value.as_object_mut(), content.as_object()) {
        target.extend(fields.clone());
    }
    serde_json::from_value(value).unwrap_or_else(|e| panic!("part fixture: {e}"))
}

/// A running `task` call that started child session `child`.
pub fn task_call(session: &str, message: &str, id: &str, child: &str) -> Part {
    part(
        session,
        message,
        id,
        json!({"type": "tool", "callID": "c1", "tool": "task", "state": {
            "status": "running",
            "input": {"description": "look around", "prompt": "p", "subagent_type": "explore"},
            "metadata": {"sessionId": child},
            "time": {"start": 1000}
        }}),
    )
}

/// The events that announce `message` and its `parts`.
pub fn events(message: Message, parts: Vec<Part>) -> Vec<Event> {
    let mut all = vec![Event::MessageUpdated {
        info: Arc::new(message),
    }];
    all.extend(
        parts
            .into_iter()
            .map(|p| Event::PartUpdated { part: Arc::new(p) }),
    );
    all
}
