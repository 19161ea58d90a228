//! The live view of a run on stderr: each child with its agent, description, current tool and
//! final status, and the retries of failed model calls.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use taskforce_actors::bus::{Event, SessionStatus};
use taskforce_agents::config::Config;
use taskforce_agents::id::{PartId, SessionId};
use taskforce_agents::model::{Message, PartKind, ToolState};

/// What the view remembers of one session.
struct Node {
    depth: usize,
    label: String,
    tools: usize,
    /// Since when the session runs, while it runs.
    running: Option<Instant>,
    /// The provider of its latest answer, for how often its calls are retried.
    provider: Option<String>,
}

impl Node {
    fn new(depth: usize, label: String) -> Self {
        Node {
            depth,
            label,
            tools: 0,
            running: None,
            provider: None,
        }
    }
}

/// A session that runs now, for the status line.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// `@agent (description)`.
    pub label: String,
    /// How long it has run.
    pub elapsed: Duration,
}

/// Turns the events of a session tree into the lines of its live view.
pub struct LiveView {
    root: SessionId,
    nodes: HashMap<SessionId, Node>,
    /// The tool calls already shown and counted: a call's part is published many times.
    calls: HashSet<PartId>,
    config: Config,
}

impl LiveView {
    /// A view of the tree below `root`, whose agent is `agent`, under `config` (for retries).
    pub fn new(root: SessionId, agent: &str, config: Config) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(root.clone(), Node::new(0, format!("@{agent}")));
        LiveView {
            root,
            nodes,
            calls: HashSet::new(),
            config,
        }
    }

    /// The sessions that run now, the root first, then the children by when they started.
    pub fn running(&self, now: Instant) -> Vec<Running> {
        let mut running: Vec<(bool, Instant, &Node)> = self
            .nodes
            .iter()
            .filter_map(|(id, n)| n.running.map(|since| (id != &self.root, since, n)))
            .collect();
        running.sort_by_key(|&(child, since, _)| (child, since));
        running
            .into_iter()
            .map(|(_, since, n)| Running {
                label: short(&n.label),
                elapsed: now.saturating_duration_since(since),
            })
            .collect()
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
                let mut node = Node::new(depth, label);
                node.running = Some(Instant::now());
                self.nodes.insert(info.id.clone(), node);
                Some(line)
            }
            Event::MessageUpdated { info } => {
                if let Message::Assistant(a) = &**info
                    && let Some(node) = self.nodes.get_mut(&a.session_id)
                {
                    node.provider = Some(a.provider_id.clone());
                }
                None
            }
            Event::PartUpdated { part } => {
                let PartKind::Tool(tool) = &part.kind else {
                    return None;
                };
                let node = self.nodes.get_mut(&part.session_id)?;
                let first = !matches!(tool.state, ToolState::Pending(_))
                    && self.calls.insert(part.id.clone());
                match &tool.state {
                    ToolState::Running(r) if first => {
                        node.tools += 1;
                        let what = describe_input(r.input.get(key_of(&tool.tool)));
                        Some(format!(
                            "{}│  {} → {}{what}",
                            indent(node.depth),
                            short(&node.label),
                            tool.tool
                        ))
                    }
                    ToolState::Completed(_) if first => {
                        node.tools += 1;
                        None
                    }
                    ToolState::Error(e) => {
                        if first {
                            node.tools += 1;
                        }
                        Some(format!(
                            "{}│  {} ✗ {}: {}",
                            indent(node.depth),
                            short(&node.label),
                            tool.tool,
                            first_line(&e.error)
                        ))
                    }
                    _ => None,
                }
            }
            Event::SessionStatus {
                session_id,
                status: SessionStatus::Busy,
            } => {
                let node = self.nodes.get_mut(session_id)?;
                node.running.get_or_insert_with(Instant::now);
                None
            }
            Event::SessionStatus {
                session_id,
                status: SessionStatus::Idle,
            } => {
                let node = self.nodes.get_mut(session_id)?;
                node.running = None;
                if session_id == &self.root {
                    return None;
                }
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
                let max = node.provider.as_deref().map(|p| self.config.max_retries(p));
                let wait = next.saturating_sub(taskforce_agents::id::now_ms());
                Some(format!(
                    "{}↻ {}: {}",
                    indent(node.depth),
                    short(&node.label),
                    retry_line(*attempt, max, wait, message)
                ))
            }
            // The root's error is the run's error, printed once when the run ends.
            Event::SessionError {
                session_id: Some(id),
                error: Some(error),
            } if id != &self.root => {
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
}

/// `retrying in 4 s, attempt 2/4: why`: a retry of a failed model call, `wait_ms` from now,
/// out of `max` retries when known.
pub fn retry_line(attempt: u32, max: Option<u32>, wait_ms: u64, message: &str) -> String {
    let seconds = wait_ms.div_ceil(1000);
    let of = max.map(|m| format!("/{m}")).unwrap_or_default();
    let why = message.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("retrying in {seconds} s, attempt {attempt}{of}: {why}")
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

fn describe_input(value: Option<&serde_json::Value>) -> String {
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
