//! The script format of the scripted model, loading, and rule matching.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::provider::{ChatMessage, Content, ModelRequest, Role};

/// The built-in scripts, by name, as embedded JSON.
const BUILTIN: &[(&str, &str)] = &[
    ("demo", include_str!("../../../scripts/demo.json")),
    ("echo", include_str!("../../../scripts/echo.json")),
];

/// The names of the built-in scripts.
pub const BUILTIN_SCRIPTS: &[&str] = &["demo", "echo"];

/// Why a script could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScriptError {
    /// The name is no built-in script and no file of that name exists or can be read.
    #[error("cannot read script `{path}`: {message} (built-in scripts: {})", BUILTIN_SCRIPTS.join(", "))]
    Read {
        /// The path tried.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The script is not valid JSON of the script format.
    #[error("invalid script {name}: {message}")]
    Invalid {
        /// The script's name or path.
        name: String,
        /// What is wrong, with the JSON path of the bad key.
        message: String,
    },
}

/// A rule script: the first rule whose `when` matches the request answers it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The rules, tried in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reply when no rule matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Reply>,
}

/// One rule: a condition and the reply it gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// What the request must look like; every condition given must hold.
    #[serde(default)]
    pub when: When,
    /// The answer.
    #[serde(default)]
    pub reply: Reply,
    /// Milliseconds to wait before each streamed chunk and tool call.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
}

/// The conditions of a rule; all the given ones must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The agent making the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A tool the request offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A tool the request does not offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_tool: Option<String>,
    /// The role of the last message (`user`, `tool`, `assistant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_role: Option<Role>,
    /// Text the last user or tool message contains (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// Text the first user message (the task's prompt) contains (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The number of assistant messages so far in the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
}

/// What the model answers; strings may use `{{last}}`, `{{prompt}}`, `{{agent}}`, `{{turn}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Answer text, streamed in chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Reasoning text, streamed before the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Tool calls, made in one step (in parallel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
}

/// A tool call of a reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments; strings inside may use the reply templates.
    #[serde(default = "empty_object")]
    pub input: Value,
}

/// The reply chosen for one request, templates filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// The index of the matching rule; `None` for the fallback or the no-match reply.
    pub rule: Option<usize>,
    /// The reply to play.
    pub reply: Reply,
    /// The wait before each chunk.
    pub delay: Duration,
}

/// `serde` default for tool inputs.
/// `text` without its `<task_metadata>` blocks: bookkeeping for the model that a reply quoting
/// a task's result leaves out, as a real model would.
fn without_task_metadata(text: &str) -> String {
    const OPEN: &str = "<task_metadata>";
    const CLOSE: &str = "</task_metadata>";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(rest[..start].trim_end());
        rest = match rest[start..].find(CLOSE) {
            Some(end) => &rest[start + end + CLOSE.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// `serde` helper.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Script {
    /// A built-in script by name (`demo`, `echo`).
    pub fn builtin(name: &str) -> Option<Script> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        // The built-ins are checked by the tests; a broken one reads as an empty script.
        Script::from_json(name, text).ok()
    }

    /// A built-in script when `spec` names one, else the script file at path `spec` (relative
    /// paths resolve against the current directory).
    pub fn load(spec: &str) -> Result<Script, ScriptError> {
        if let Some(script) = Script::builtin(spec) {
            return Ok(script);
        }
        Script::from_file(Path::new(spec))
    }

    /// The script in the JSON file at `path`.
    pub fn from_file(path: &Path) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Script::from_json(&path.display().to_string(), &text)
    }

    /// The script in `text`; `name` is used in errors. Keys starting with `_` are comments.
    pub fn from_json(name: &str, text: &str) -> Result<Script, ScriptError> {
        let invalid = |message: String| ScriptError::Invalid {
            name: name.to_string(),
            message,
        };
        let mut value: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        strip_comments(&mut value);
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            invalid(format!("at `{path}`: {}", e.inner()))
        })
    }

    /// The reply for `request`: the first matching rule, else the fallback, else a text saying
    /// that nothing matched.
    pub fn select(&self, request: &ModelRequest) -> Selection {
        let facts = Facts::of(request);
        let (rule, reply, delay_ms) = match self.rules.iter().position(|r| facts.matches(&r.when)) {
            Some(i) => (Some(i), self.rules[i].reply.clone(), self.rules[i].delay_ms),
            None => match &self.fallback {
                Some(reply) => (None, reply.clone(), 0),
                None => (None, facts.no_match(), 0),
            },
        };
        Selection {
            rule,
            reply: facts.render_reply(reply),
            delay: Duration::from_millis(delay_ms),
        }
    }
}

/// Removes `_comment`-style keys from the structural objects of a script.
fn strip_comments(script: &mut Value) {
    fn strip(v: &mut Value) {
        if let Value::Object(map) = v {
            map.retain(|k, _| !k.starts_with('_'));
        }
    }
    fn strip_reply(reply: &mut Value) {
        strip(reply);
        if let Some(Value::Array(calls)) = reply.get_mut("tool_calls") {
            calls.iter_mut().for_each(strip);
        }
    }
    strip(script);
    if let Some(Value::Array(rules)) = script.get_mut("rules") {
        for rule in rules {
            strip(rule);
            if let Some(when) = rule.get_mut("when") {
                strip(when);
            }
            if let Some(reply) = rule.get_mut("reply") {
                strip_reply(reply);
            }
        }
    }
    if let Some(fallback) = script.get_mut("fallback") {
        strip_reply(fallback);
    }
}

/// What the rules look at in a request.
struct Facts<'a> {
    agent: &'a str,
    tools: HashSet<&'a str>,
    last_role: Option<Role>,
    /// The text of the last user or tool message.
    last: String,
    /// The text of the first user message.
    prompt: String,
    turn: u64,
}

impl<'a> Facts<'a> {
    /// The facts of `request`.
    fn of(request: &'a ModelRequest) -> Self {
        let last = request
            .messages
            .iter()
            .rev()
            .find(|m| matches!(m.role, Role::User | Role::Tool))
            .map(message_text)
            .unwrap_or_default();
        let prompt = request
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(message_text)
            .unwrap_or_default();
        Facts {
            agent: &request.agent,
            tools: request.tools.iter().map(|t| &*t.name).collect(),
            last_role: request.messages.last().map(|m| m.role),
            last,
            prompt,
            turn: request
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count() as u64,
        }
    }

    /// Whether every condition of `when` holds.
    fn matches(&self, when: &When) -> bool {
        let contains =
            |haystack: &str, needle: &str| haystack.to_lowercase().contains(&needle.to_lowercase());
        when.agent.as_deref().is_none_or(|a| a == self.agent)
            && when.tool.as_deref().is_none_or(|t| self.tools.contains(t))
            && when
                .no_tool
                .as_deref()
                .is_none_or(|t| !self.tools.contains(t))
            && when.last_role.is_none_or(|r| self.last_role == Some(r))
            && when
                .contains
                .as_deref()
                .is_none_or(|c| contains(&self.last, c))
            && when
                .prompt
                .as_deref()
                .is_none_or(|p| contains(&self.prompt, p))
            && when.turn.is_none_or(|t| t == self.turn)
    }

    /// The reply when nothing matched and the script has no fallback.
    fn no_match(&self) -> Reply {
        let role = self.last_role.map_or("none", |r| match r {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        });
        Reply {
            text: Some(format!(
                "[scripted model] No rule of the script matched this request \
                 (agent `{}`, last message from {role}, turn {}).",
                self.agent, self.turn
            )),
            ..Reply::default()
        }
    }

    /// `reply` with its templates filled in.
    fn render_reply(&self, reply: Reply) -> Reply {
        Reply {
            text: reply.text.map(|t| self.render(t)),
            reasoning: reply.reasoning.map(|t| self.render(t)),
            tool_calls: reply
                .tool_calls
                .into_iter()
                .map(|c| ScriptedToolCall {
                    name: c.name,
                    input: self.render_value(c.input),
                })
                .collect(),
        }
    }

    /// A template string filled in; a string without a template is kept as it is.
    fn render(&self, template: String) -> String {
        if !template.contains("{{") {
            return template;
        }
        template
            .replace("{{last}}", &without_task_metadata(&self.last))
            .replace("{{prompt}}", &self.prompt)
            .replace("{{agent}}", self.agent)
            .replace("{{turn}}", &self.turn.to_string())
    }

    /// Every string inside `value` filled in.
    fn render_value(&self, value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.render(s)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.render_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, self.render_value(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// A message's text and tool outputs, as rules and templates see it.
fn message_text(message: &ChatMessage) -> String {
    message
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            Content::ToolResult { output, .. } => Some(output.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::provider::ToolSpec;

    #[test]
    fn quoted_task_results_leave_their_metadata_out() {
        let results = "## one\nfound a\n\n<task_metadata>\nsession_id: ses_1\n</task_metadata>\n\n## two\nfound b\n\n<task_metadata>\nsession_id: ses_2\n</task_metadata>";
        assert_eq!(
            without_task_metadata(results),
            "## one\nfound a\n\n## two\nfound b"
        );
        assert_eq!(without_task_metadata("plain"), "plain");
        assert_eq!(without_task_metadata("cut <task_metadata>\nsession"), "cut");
    }

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "".into(),
            parameters: json!({}).into(),
        }
    }

    #[test]
    fn builtins_parse() {
        for (name, text) in BUILTIN {
            let script = Script::from_json(name, text).unwrap();
            assert!(
                !script.rules.is_empty() || script.fallback.is_some(),
                "{name}"
            );
        }
        assert_eq!(
            BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            BUILTIN_SCRIPTS
        );
    }

    #[test]
    fn unknown_keys_are_errors_with_a_path() {
        let err = Script::from_json("x", r#"{"rules": [{"when": {"agnet": "build"}}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("rules[0].when"), "{err}");
        assert!(err.contains("agnet"), "{err}");
    }

    #[test]
    fn comment_keys_are_ignored_but_tool_inputs_keep_theirs() {
        let script = Script::from_json(
            "x",
            r#"{"_about": "c", "rules": [{"_c": 1, "when": {"_c": 2}, "reply": {"_c": 3,
                "tool_calls": [{"_c": 4, "name": "t", "input": {"_keep": true}}]}}],
                "fallback": {"_c": 5, "text": "f"}}"#,
        )
        .unwrap();
        assert_eq!(
            script.rules[0].reply.tool_calls[0].input,
            json!({"_keep": true})
        );
    }

    #[test]
    fn conditions_and_templates() {
        let script = Script::from_json(
            "x",
            r#"{"rules": [
                {"when": {"agent": "a", "turn": 1, "last_role": "tool"}, "reply": {"text": "t1 {{last}}"}},
                {"when": {"no_tool": "bash", "contains": "HELLO"}, "reply": {"text": "hi {{agent}}"}},
                {"when": {"tool": "bash", "prompt": "first"}, "reply": {"tool_calls": [{"name": "bash", "input": {"command": "echo {{prompt}}"}}]}}
            ], "fallback": {"text": "fb {{turn}}"}}"#,
        )
        .unwrap();
        let mut req = ModelRequest {
            agent: "a".into(),
            messages: vec![ChatMessage::text(Role::User, "say hello")],
            ..ModelRequest::default()
        };
        let s = script.select(&req);
        assert_eq!(s.rule, Some(1));
        assert_eq!(s.reply.text.as_deref(), Some("hi a"));

        std::sync::Arc::make_mut(&mut req.tools).push(tool("bash"));
        req.messages[0] = ChatMessage::text(Role::User, "first thing");
        let s = script.select(&req);
        assert_eq!(s.rule, Some(2));
        assert_eq!(
            s.reply.tool_calls[0].input,
            json!({"command": "echo first thing"})
        );

        req.messages.push(ChatMessage::text(Role::Assistant, "x"));
        req.messages.push(ChatMessage {
            role: Role::Tool,
            content: vec![Content::ToolResult {
                call_id: "c".into(),
                name: "bash".into(),
                output: "out".into(),
                is_error: false,
            }],
        });
        let s = script.select(&req);
        assert_eq!(s.rule, Some(0));
        assert_eq!(s.reply.text.as_deref(), Some("t1 out"));

        req.agent = "other".into();
        req.messages[0] = ChatMessage::text(Role::User, "nothing");
        let s = script.select(&req);
        assert_eq!(s.rule, None);
        assert_eq!(s.reply.text.as_deref(), Some("fb 1"));
    }

    #[test]
    fn no_match_without_fallback_is_a_text() {
        let s = Script::default().select(&ModelRequest {
            agent: "build".into(),
            ..ModelRequest::default()
        });
        assert!(s.reply.text.unwrap().contains("No rule"));
    }

    #[test]
    fn load_reports_missing_files() {
        let err = Script::load("/no/such/script.json").unwrap_err();
        assert!(matches!(err, ScriptError::Read { .. }));
        assert!(err.to_string().contains("demo, echo"), "{err}");
    }
}
