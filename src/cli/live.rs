//! The live view of a run on stderr: each child with its agent, description, current tool and
//! final status.

use std::collections::HashMap;
use std::io::Write;

use taskforce_actors::bus::{Event, SessionStatus};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{PartKind, ToolState};

/// What the view remembers of one session.
struct Node {
    depth: usize,
    label: String,
    tools: usize,
}

/// Prints one line per notable event of a session tree.
pub struct LiveView {
    root: SessionId,
    nodes: HashMap<SessionId, Node>,
}

impl LiveView {
    /// A view of the tree below `root`, whose agent is `agent`.
    pub fn new(root: SessionId, agent: &str) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            root.clone(),
            Node {
                depth: 0,
                label: format!("@{agent}"),
                tools: 0,
            },
        );
        LiveView { root, nodes }
    }

    /// The line to print for `event`, if any.
    pub fn line(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::SessionCreated { info } => {
                let parent = info.parent_id.as_ref()?;
                let depth = self.nodes.get(parent).map_or(1, |n| n.depth + 1);
                let label = info
                    .title
                    .rsplit_once(" (@")
                    .map(|(desc, rest)| {
                        let agent = rest.trim_end_matches(" subagent)");
                        format!("@{agent} · {desc}")
                    })
                    .unwrap_or_else(|| info.title.clone());
                let line = format!("{}├─ {label}  [{}]", indent(depth - 1), info.id);
                self.nodes.insert(
                    info.id.clone(),
                    Node {
                        depth,
                        label,
                        tools: 0,
                    },
                );
                Some(line)
            }
            Event::PartUpdated { part } => {
                let PartKind::Tool(tool) = &part.kind else {
                    return None;
                };
                let node = self.nodes.get_mut(&part.session_id)?;
                match &tool.state {
                    ToolState::Running(r) if r.title.is_none() => {
                        node.tools += 1;
                        let what = describe_input(&tool.tool, r.input.get(key_of(&tool.tool)));
                        Some(format!(
                            "{}│  {} → {}{what}",
                            indent(node.depth),
                            short(&node.label),
                            tool.tool
                        ))
                    }
                    ToolState::Error(e) => Some(format!(
                        "{}│  {} ✗ {}: {}",
                        indent(node.depth),
                        short(&node.label),
                        tool.tool,
                        first_line(&e.error)
                    )),
                    _ => None,
                }
            }
            Event::SessionStatus {
                session_id,
                status: SessionStatus::Idle,
            } if session_id != &self.root => {
                let node = self.nodes.get(session_id)?;
                Some(format!(
                    "{}└─ {} done ({} tool call{})",
                    indent(node.depth - 1),
                    node.label,
                    node.tools,
                    if node.tools == 1 { "" } else { "s" }
                ))
            }
            Event::SessionStatus {
                session_id,
                status:
                    SessionStatus::Retry {
                        attempt,
                        message,
                        next,
                    },
            } => {
                let node = self.nodes.get(session_id)?;
                let wait = next.saturating_sub(taskforce_agents::id::now_ms()) as f64 / 1000.0;
                Some(format!(
                    "{}↻ {} retry {attempt} in {wait:.1}s: {}",
                    indent(node.depth),
                    short(&node.label),
                    first_line(message)
                ))
            }
            Event::SessionError {
                session_id: Some(id),
                error: Some(error),
            } => {
                let node = self.nodes.get(id)?;
                Some(format!(
                    "{}✗ {} failed: {}",
                    indent(node.depth),
                    node.label,
                    first_line(error.message().unwrap_or(error.name()))
                ))
            }
            _ => None,
        }
    }

    /// Prints the line for `event` on stderr, if any.
    pub fn show(&mut self, event: &Event) {
        if let Some(line) = self.line(event) {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{line}");
        }
    }
}

/// `@explore (Find the tests)` for the label `@explore · Find the tests`.
fn short(label: &str) -> String {
    match label.split_once(" · ") {
        Some((agent, description)) => format!("{agent} ({description})"),
        None => label.to_string(),
    }
}

fn indent(depth: usize) -> String {
    "│  ".repeat(depth)
}

/// The argument that best describes a call of `tool`.
fn key_of(tool: &str) -> &'static str {
    match tool {
        "bash" => "command",
        "read" | "write" | "edit" => "filePath",
        "glob" | "grep" => "pattern",
        "list" => "path",
        "task" => "description",
        _ => "",
    }
}

fn describe_input(tool: &str, value: Option<&serde_json::Value>) -> String {
    let _ = tool;
    match value.and_then(|v| v.as_str()) {
        Some(s) => format!(" {}", first_line(s)),
        None => String::new(),
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(99).collect::<String>())
    } else {
        line.to_string()
    }
}
