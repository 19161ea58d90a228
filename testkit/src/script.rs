//! Scripted fake models: ready-made answers and the readers of a recorded request that the
//! answering closures of [`FakeOpenAi`](crate::fake_openai::FakeOpenAi) decide by.

use serde_json::{Value, json};

use crate::fake_openai::{RecordedRequest, Response};

/// Whether `req` comes from a subagent: the `task` tool is not offered to it.
pub fn is_child(req: &RecordedRequest) -> bool {
    !req.tool_names().contains(&"task")
}

/// A call of the `task` tool with the arguments `args` (JSON).
pub fn task_call(args: &str) -> Response {
    Response::tool_calls(&[("call_task_1", "task", args)])
}

/// A model call making the task calls `calls` (call id, arguments as JSON) at once.
pub fn task_calls(calls: impl IntoIterator<Item = (String, String)>) -> Response {
    let calls: Vec<(String, String)> = calls.into_iter().collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "task", args.as_str()))
        .collect();
    Response::tool_calls(&refs)
}

/// A call of the `bash` tool running `command`.
pub fn bash(command: &str) -> Response {
    let args = json!({"command": command, "description": "run it"}).to_string();
    Response::tool_calls(&[("call_bash", "bash", &args)])
}

/// A call of the `skill` tool loading the skill called `name`.
pub fn skill(name: &str) -> Response {
    let args = json!({ "name": name }).to_string();
    Response::tool_calls(&[("call_skill", "skill", &args)])
}

/// A fake model that answers a user turn with `call` (a tool call) and any later turn (the
/// tool's result) with the text `answer`.
pub fn call_then(
    call: Response,
    answer: &'static str,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        if req.last_role() == Some("user") {
            call.clone()
        } else {
            Response::text(answer)
        }
    }
}

/// A fake model for one delegation: a child answers `child`; a parent calls the task tool with
/// `args` on a user turn, then answers `parent`.
pub fn delegating(
    args: &'static str,
    child: &'static str,
    parent: &'static str,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    delegating_with(args, move || Response::text(child), parent)
}

/// Like [`delegating`], with the child's answer made by `child` (one held back, or stalled).
pub fn delegating_with(
    args: &'static str,
    child: impl Fn() -> Response + Send + Sync + 'static,
    parent: &'static str,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        if is_child(req) {
            child()
        } else if req.last_role() == Some("user") {
            task_call(args)
        } else {
            Response::text(parent)
        }
    }
}

/// The text of the first user message of `req`: who is asking (the root's prompt or a task's
/// prompt).
pub fn first_user(req: &RecordedRequest) -> String {
    req.messages()
        .iter()
        .find(|m| m["role"] == "user")
        .map(content_text)
        .unwrap_or_default()
}

/// The text of the last user message of `req`.
pub fn last_user_text(req: &RecordedRequest) -> String {
    req.messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(content_text)
        .unwrap_or_default()
}

/// The text of the newest message of `req`.
pub fn last_content(req: &RecordedRequest) -> String {
    req.messages().last().map(content_text).unwrap_or_default()
}

/// How many tool results `req` carries.
pub fn tool_results(req: &RecordedRequest) -> usize {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count()
}

/// A message's `content`: the string itself, or the JSON of anything else.
fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A fake model for a fan-out: the root starts `children` children in one step (task calls
/// whose prompts are `child 0`, `child 1`, …) and answers `root heard every child` once their
/// results are in; child `n` answers as `child(n)` says.
pub fn fan_out(
    children: usize,
    child: impl Fn(usize) -> Response + Send + Sync + 'static,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        let who = first_user(req);
        if let Some(n) = who.strip_prefix("child ") {
            return child(n.parse().unwrap_or(0));
        }
        if req.last_role() == Some("user") {
            return task_calls((0..children).map(|i| {
                let args = json!({"description": format!("part {i}"), "prompt": format!("child {i}"), "subagent_type": "general"});
                (format!("call_{i}"), args.to_string())
            }));
        }
        Response::text("root heard every child")
    }
}
