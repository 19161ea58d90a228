//! Claude Code agent files (`.claude/agents/*.md`) mapped onto taskforce agents.
//!
//! The mapping, so that existing files work unchanged:
//! - `name` → the agent's name (the file name without `.md` when absent);
//! - `description` → `description`; the body → `prompt`; `color` → `color`;
//!   `maxTurns` → `steps`; the mode is always `subagent`;
//! - `tools` (a comma-separated list or a YAML list) → `permission`: `"*": deny`, then `allow`
//!   for each listed tool — those tools allowed, every other tool denied. Claude's tool names
//!   map to ours: Read→read, Write/Edit/MultiEdit/NotebookEdit→edit, Glob→glob, Grep→grep,
//!   LS→list, Bash/BashOutput/KillShell→bash, TodoWrite→todowrite, Task/Agent→task,
//!   WebFetch→webfetch, WebSearch→websearch, Skill→skill; other names (MCP tools) are kept as written.
//!   Without `tools` the agent keeps every tool its defaults allow;
//! - `disallowedTools` → `deny` for each listed tool, after the allows;
//! - `model`: `inherit` (or absent) → no model of its own, so it runs on the caller's model;
//!   `provider/model` → that model; any other word is looked up in `[model_aliases]`; an alias
//!   that is not defined there falls back to `inherit` with a warning;
//! - Claude Code's other documented keys (`permissionMode`, `hooks`, `skills`, `mcpServers`…)
//!   have no taskforce counterpart yet and are ignored; a key Claude Code does not document
//!   ([`CLAUDE_KEYS`]) is an error, so that a misspelt key is not silently lost.

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::markdown::Frontmatter;

/// The frontmatter keys Claude Code documents for its agent files.
pub const CLAUDE_KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "disallowedTools",
    "model",
    "permissionMode",
    "maxTurns",
    "skills",
    "mcpServers",
    "hooks",
    "memory",
    "background",
    "effort",
    "isolation",
    "initialPrompt",
    "color",
];

/// Why a Claude Code agent file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaudeError {
    /// A key's value has the wrong type.
    #[error("key `{key}`: {message}")]
    Invalid {
        /// The frontmatter key.
        key: String,
        /// What is wrong with its value.
        message: String,
    },
    /// A key Claude Code does not document (see [`CLAUDE_KEYS`]).
    #[error("unknown key `{0}`")]
    UnknownKey(String),
}

/// A Claude Code agent file converted to taskforce's agent config form.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeAgent {
    /// The agent's name.
    pub name: String,
    /// The agent in the shape of an `[agent.NAME]` table.
    pub config: Map<String, Value>,
    /// Things that were not mapped and that the user should know about.
    pub warnings: Vec<String>,
}

/// Converts a Claude Code agent file; `stem` is the file name without `.md`.
pub fn from_claude(
    front: &Frontmatter,
    stem: &str,
    aliases: &IndexMap<String, String>,
) -> Result<ClaudeAgent, ClaudeError> {
    let data = &front.data;
    if let Some(key) = data.keys().find(|k| !CLAUDE_KEYS.contains(&k.as_str())) {
        return Err(ClaudeError::UnknownKey(key.clone()));
    }
    let name = match data.get("name") {
        None | Some(Value::Null) => stem.to_string(),
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(_) => return Err(invalid("name", "expected a non-empty string")),
    };
    let mut config = Map::new();
    let mut warnings = Vec::new();
    config.insert("mode".into(), json!("subagent"));
    if let Some(d) = data.get("description") {
        config.insert("description".into(), string_field("description", d)?);
    }
    if !front.body.is_empty() {
        config.insert("prompt".into(), json!(front.body));
    }
    if let Some(c) = data.get("color") {
        config.insert("color".into(), string_field("color", c)?);
    }
    if let Some(t) = data.get("maxTurns") {
        config.insert("steps".into(), t.clone());
    }
    let mut permission = Map::new();
    if let Some(tools) = data.get("tools") {
        permission.insert("*".into(), json!("deny"));
        for tool in tool_list("tools", tools)? {
            permission.insert(tool, json!("allow"));
        }
    }
    if let Some(tools) = data.get("disallowedTools") {
        for tool in tool_list("disallowedTools", tools)? {
            permission.shift_remove(&tool);
            permission.insert(tool, json!("deny"));
        }
    }
    if !permission.is_empty() {
        config.insert("permission".into(), Value::Object(permission));
    }
    match data.get("model") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) => {
            let m = m.trim();
            if m == "inherit" || m.is_empty() {
            } else if let Some(target) = aliases.get(m) {
                config.insert("model".into(), json!(target));
            } else if m.contains('/') {
                config.insert("model".into(), json!(m));
            } else {
                warnings.push(format!(
                    "model alias \"{m}\" is not defined in [model_aliases]; agent \"{name}\" runs on its caller's model"
                ));
            }
        }
        Some(_) => return Err(invalid("model", "expected a string")),
    }
    Ok(ClaudeAgent {
        name,
        config,
        warnings,
    })
}

fn invalid(key: &str, message: &str) -> ClaudeError {
    ClaudeError::Invalid {
        key: key.to_string(),
        message: message.to_string(),
    }
}

fn string_field(key: &str, value: &Value) -> Result<Value, ClaudeError> {
    match value {
        Value::String(_) => Ok(value.clone()),
        _ => Err(invalid(key, "expected a string")),
    }
}

/// A `Read, Grep` string or a YAML list, mapped to taskforce permission names, deduplicated.
fn tool_list(key: &str, value: &Value) -> Result<Vec<String>, ClaudeError> {
    let names: Vec<String> = match value {
        Value::String(s) => s.split(',').map(|t| t.trim().to_string()).collect(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.trim().to_string()),
                _ => Err(invalid(key, "expected tool names")),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(invalid(key, "expected a comma-separated list of tools"));
        }
    };
    let mut out: Vec<String> = Vec::new();
    for n in names.iter().filter(|n| !n.is_empty()) {
        let mapped = map_tool(n);
        if !out.contains(&mapped) {
            out.push(mapped);
        }
    }
    Ok(out)
}

/// Claude Code's tool name → the taskforce permission that governs it.
fn map_tool(name: &str) -> String {
    match name {
        "Read" => "read",
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => "edit",
        "Glob" => "glob",
        "Grep" => "grep",
        "LS" => "list",
        "Bash" | "BashOutput" | "KillShell" => "bash",
        "TodoWrite" => "todowrite",
        "Task" | "Agent" => "task",
        "WebFetch" => "webfetch",
        "WebSearch" => "websearch",
        "Skill" => "skill",
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn front(text: &str) -> Frontmatter {
        crate::markdown::parse(text, Path::new("x.md")).unwrap()
    }

    #[test]
    fn tools_become_allow_list_over_deny_all() {
        let f = front(
            "---\nname: code-reviewer\ndescription: Reviews\ntools: Read, Grep, Glob, Bash, Write, Edit, Skill\nmodel: inherit\n---\nYou review.",
        );
        let a = from_claude(&f, "file", &IndexMap::new()).unwrap();
        assert_eq!(a.name, "code-reviewer");
        assert_eq!(
            Value::Object(a.config),
            json!({"mode": "subagent", "description": "Reviews", "prompt": "You review.",
                   "permission": {"*": "deny", "read": "allow", "grep": "allow", "glob": "allow",
                                  "bash": "allow", "edit": "allow", "skill": "allow"}})
        );
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn no_tools_means_no_rules_and_name_falls_back_to_stem() {
        let a = from_claude(&front("Body only"), "helper", &IndexMap::new()).unwrap();
        assert_eq!(a.name, "helper");
        assert!(!a.config.contains_key("permission"));
    }

    #[test]
    fn model_aliases_resolve_through_config() {
        let mut aliases = IndexMap::new();
        aliases.insert(
            "sonnet".to_string(),
            "anthropic/claude-sonnet-4-5".to_string(),
        );
        let a = from_claude(&front("---\nmodel: sonnet\n---\n"), "a", &aliases).unwrap();
        assert_eq!(a.config["model"], "anthropic/claude-sonnet-4-5");
        let b = from_claude(&front("---\nmodel: opus\n---\n"), "b", &aliases).unwrap();
        assert!(!b.config.contains_key("model"));
        assert_eq!(b.warnings.len(), 1);
        assert!(b.warnings[0].contains("\"opus\""));
        let c = from_claude(&front("---\nmodel: openai/gpt-4o\n---\n"), "c", &aliases).unwrap();
        assert_eq!(c.config["model"], "openai/gpt-4o");
    }

    #[test]
    fn disallowed_tools_deny_after_allows_and_lists_work() {
        let f = front("---\ntools: [Read, Bash]\ndisallowedTools: Bash\nmaxTurns: 7\n---\n");
        let a = from_claude(&f, "a", &IndexMap::new()).unwrap();
        assert_eq!(
            a.config["permission"],
            json!({"*": "deny", "read": "allow", "bash": "deny"})
        );
        assert_eq!(a.config["steps"], 7);
    }

    #[test]
    fn wrong_types_are_named() {
        let err = from_claude(&front("---\ntools: 5\n---\n"), "a", &IndexMap::new()).unwrap_err();
        assert!(err.to_string().contains("tools"), "{err}");
    }

    #[test]
    fn documented_keys_are_accepted_and_others_refused() {
        let f = front(
            "---\nname: a\npermissionMode: plan\nskills: [x]\nhooks: {}\nmemory: project\nbackground: true\neffort: high\nisolation: worktree\ninitialPrompt: go\nmcpServers: [gh]\n---\n",
        );
        assert!(from_claude(&f, "a", &IndexMap::new()).is_ok());
        let f = front("---\nname: a\ndescriptoin: typo\n---\n");
        assert_eq!(
            from_claude(&f, "a", &IndexMap::new()).unwrap_err(),
            ClaudeError::UnknownKey("descriptoin".into())
        );
    }
}
