//! The TUI's own state beside the server's: which session is open, the prompt being written,
//! the open panel, the primary agent, and what a key press asks the server to do.

mod input;
mod overlay;
mod question;

pub use question::rows as question_rows;

use std::time::{Duration, Instant};

use serde_json::Value;
use taskforce_actors::bus::Event;
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_agents::model::PartKind;

use super::editor::Editor;
use super::keys::Keybinds;
use super::state::Mirror;
use super::view::theme::Theme;

pub use overlay::Overlay;

/// Something the server is asked to do (run by the TUI's loop, answered as events).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send a prompt to `session` (a new root session when `None`).
    Prompt {
        /// The session, or `None` for a new one.
        session: Option<String>,
        /// The text.
        text: String,
        /// The primary agent chosen with Tab.
        agent: Option<String>,
    },
    /// Run a configured slash command in `session` (a new root session when `None`).
    Command {
        /// The session, or `None` for a new one.
        session: Option<String>,
        /// The command's name, without `/`.
        name: String,
        /// Its arguments.
        arguments: String,
        /// The primary agent chosen with Tab.
        agent: Option<String>,
    },
    /// Load a session's messages.
    Load(String),
    /// Cancel a session's run and its whole tree.
    Abort(String),
    /// Compact a session's history.
    Compact(String),
    /// Undo a session's last turn (the server reverts to before its last prompt).
    Undo(String),
    /// Redo the last undone turn.
    Redo(String),
    /// Answer a question request (the labels picked, one list per question).
    AnswerQuestion(String, Vec<Vec<String>>),
    /// Dismiss a question request.
    DismissQuestion(String),
    /// Answer a permission ask.
    Reply(String, PermissionReply),
    /// Reload the session list (the session list was opened).
    ListSessions,
    /// Look up files for `@` completion.
    FindFiles(String),
}

/// A primary agent Tab can switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentChoice {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Whether it can be the session's agent (primary or all), not only a subagent.
    pub primary: bool,
}

/// A slash command the `/` completion offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandChoice {
    /// Its name, without `/`.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Whether the TUI runs it itself (`/new`, `/sessions`…) rather than the server.
    pub builtin: bool,
}

/// The whole TUI state.
#[derive(Debug)]
pub struct App {
    /// The server's state as far as followed.
    pub mirror: Mirror,
    /// The open session; `None` before the first prompt of a new session.
    pub current: Option<String>,
    /// The prompt editor.
    pub editor: Editor,
    /// The keybinds.
    pub keys: Keybinds,
    /// The colours.
    pub theme: Theme,
    /// The open panel, if any.
    pub overlay: Overlay,
    /// The agents (primary ones first, as the server lists them).
    pub agents: Vec<AgentChoice>,
    /// The index in `agents` of the primary agent new prompts go to.
    pub agent: usize,
    /// The slash commands: built-in, then the server's.
    pub commands: Vec<CommandChoice>,
    /// The default model, as `provider/model`.
    pub model: Option<String>,
    /// Context windows in tokens by `provider/model`, where the configuration gives them.
    pub context_limits: std::collections::HashMap<String, u64>,
    /// The project the server serves.
    pub project: String,
    /// Lines scrolled up from the conversation's end (0: following the end).
    pub scroll: usize,
    /// The task card Enter opens when the editor is empty (an index among the open session's
    /// task cards, from the newest).
    pub card: usize,
    /// When the leader was pressed, while its next key is awaited.
    pub leader: Option<Instant>,
    /// When Esc was pressed once on a busy tree (a second one within a second interrupts).
    pub interrupt: Option<Instant>,
    /// A short notice in the footer, and when it was shown.
    pub notice: Option<(String, Instant)>,
    /// The selected answer of the ask on screen (0 once, 1 always, 2 reject).
    pub ask_choice: usize,
    /// Where the person is in answering the question on screen.
    pub answering: question::Answering,
    /// Whether reasoning is shown whole rather than folded to one line.
    pub show_thinking: bool,
    /// Whether the event stream is connected.
    pub connected: bool,
    /// Text parts already rendered (drawing takes `&App`).
    pub rendered: std::cell::RefCell<super::view::markdown::Cache>,
    /// Set once the TUI should end.
    pub quit: bool,
}

/// How long the leader waits for its next key.
const LEADER_WINDOW: Duration = Duration::from_secs(2);
/// How long a first Esc on a busy tree waits for the second.
const INTERRUPT_WINDOW: Duration = Duration::from_secs(1);
/// How long a notice stays in the footer.
const NOTICE_FOR: Duration = Duration::from_secs(4);

impl App {
    /// A TUI on `project` with `keys` and `theme`, no session open yet.
    pub fn new(project: String, keys: Keybinds, theme: Theme, history: Vec<String>) -> App {
        App {
            mirror: Mirror::default(),
            current: None,
            editor: Editor::new(history),
            keys,
            theme,
            overlay: Overlay::None,
            agents: Vec::new(),
            agent: 0,
            commands: builtin_commands(false),
            model: None,
            context_limits: std::collections::HashMap::new(),
            project,
            scroll: 0,
            card: 0,
            leader: None,
            interrupt: None,
            notice: None,
            ask_choice: 0,
            answering: question::Answering::default(),
            show_thinking: false,
            connected: false,
            rendered: std::cell::RefCell::default(),
            quit: false,
        }
    }

    /// Takes the server's agents (`GET /agent`); the first primary one is chosen.
    pub fn set_agents(&mut self, agents: &[Value]) {
        self.agents = agents
            .iter()
            .filter(|a| !a.get("hidden").and_then(Value::as_bool).unwrap_or(false))
            .filter_map(|a| {
                let name = a.get("name")?.as_str()?.to_string();
                let mode = a.get("mode").and_then(Value::as_str).unwrap_or("all");
                Some(AgentChoice {
                    name,
                    description: a
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    primary: mode != "subagent",
                })
            })
            .collect();
        self.agent = self.agents.iter().position(|a| a.primary).unwrap_or(0);
    }

    /// Takes the server's commands (`GET /command`) after the built-in ones; `/undo` only when
    /// the server can revert.
    pub fn set_commands(&mut self, commands: &[Value], can_undo: bool) {
        let mut all = builtin_commands(can_undo);
        for c in commands {
            let Some(name) = c.get("name").and_then(Value::as_str) else {
                continue;
            };
            if all.iter().any(|b| b.name == name) {
                continue;
            }
            all.push(CommandChoice {
                name: name.to_string(),
                description: c
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                builtin: false,
            });
        }
        self.commands = all;
    }

    /// Takes the model settings of a server's configuration: the default model and the context
    /// windows (`provider.P.models.M.context`, or OpenCode's `….limit.context`).
    pub fn set_config(&mut self, config: &Value) {
        self.model = config
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        let providers = config.get("provider").and_then(Value::as_object);
        for (provider, settings) in providers.into_iter().flatten() {
            let models = settings.get("models").and_then(Value::as_object);
            for (model, m) in models.into_iter().flatten() {
                let limit = m
                    .get("context")
                    .or_else(|| m.pointer("/limit/context"))
                    .and_then(Value::as_u64);
                if let Some(limit) = limit {
                    self.context_limits
                        .insert(format!("{provider}/{model}"), limit);
                }
            }
        }
    }

    /// How full the open session's context is: its tokens and, where known, the window.
    pub fn context_use(&self) -> Option<(u64, Option<u64>)> {
        let view = self
            .current
            .as_deref()
            .and_then(|c| self.mirror.session(c))?;
        let model = view
            .messages
            .iter()
            .rev()
            .find_map(|m| match m.info.as_ref() {
                taskforce_agents::model::Message::Assistant(a) => {
                    Some(format!("{}/{}", a.provider_id, a.model_id))
                }
                taskforce_agents::model::Message::User(_) => None,
            });
        let limit = model.and_then(|m| self.context_limits.get(&m).copied());
        Some((view.context_tokens(), limit))
    }

    /// The primary agent new prompts go to.
    pub fn agent_name(&self) -> Option<&str> {
        self.agents.get(self.agent).map(|a| a.name.as_str())
    }

    /// Whether the open session is a child (its prompts go to its own agent, not the primary
    /// agent Tab chose).
    pub fn in_child(&self) -> bool {
        self.current
            .as_deref()
            .and_then(|c| self.mirror.session(c))
            .is_some_and(|s| s.info.parent_id.is_some())
    }

    /// The agent the editor's prompt goes to: the child's own in a child session, else the
    /// chosen primary agent.
    pub fn prompt_agent(&self) -> Option<&str> {
        if self.in_child() {
            self.current
                .as_deref()
                .and_then(|c| self.mirror.session(c))
                .and_then(|s| s.agent())
        } else {
            self.agent_name()
        }
    }

    /// Shows a notice in the footer.
    pub fn notify(&mut self, text: impl Into<String>) {
        self.notice = Some((text.into(), Instant::now()));
    }

    /// The notice to show now, if any.
    pub fn notice(&self) -> Option<&str> {
        self.notice
            .as_ref()
            .filter(|(_, at)| at.elapsed() < NOTICE_FOR)
            .map(|(text, _)| text.as_str())
    }

    /// The root of the open session's tree.
    pub fn root(&self) -> Option<String> {
        let current = self.current.as_deref()?;
        Some(self.mirror.root_of(current).to_string())
    }

    /// Whether anything in the open session's tree runs.
    pub fn tree_busy(&self) -> bool {
        self.root().is_some_and(|root| self.mirror.any_busy(&root))
    }

    /// The pending ask shown now: the oldest one raised in the open session's tree.
    pub fn ask(&self) -> Option<&PermissionRequest> {
        let root = self.root()?;
        self.mirror.asks().iter().find(|a| {
            a.root_session_id.as_str() == root || self.mirror.root_of(a.session_id.as_str()) == root
        })
    }

    /// The child sessions of the open session's task cards, newest first.
    pub fn task_children(&self) -> Vec<String> {
        let Some(view) = self.current.as_deref().and_then(|c| self.mirror.session(c)) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = view
            .messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match &p.kind {
                PartKind::Tool(t) if t.tool == "task" => super::view::card::child_id(t),
                _ => None,
            })
            .collect();
        ids.reverse();
        ids
    }

    /// Opens session `id`: loads its messages when they are not known yet.
    pub fn open(&mut self, id: String) -> Vec<Effect> {
        let load = self.mirror.session(&id).is_none_or(|s| !s.loaded);
        self.current = Some(id.clone());
        self.scroll = 0;
        self.card = 0;
        self.overlay = Overlay::None;
        if load {
            vec![Effect::Load(id)]
        } else {
            Vec::new()
        }
    }

    /// Follows one server event; answers what a remote request for the TUI (`tui.*`) asks.
    pub fn apply(&mut self, event: &Event) -> Vec<Effect> {
        self.mirror.apply(event);
        self.remote(event)
    }

    /// Closes what expired: the leader, the first Esc, an old notice.
    pub fn tick(&mut self) {
        if self.leader.is_some_and(|at| at.elapsed() > LEADER_WINDOW) {
            self.leader = None;
        }
        if self
            .interrupt
            .is_some_and(|at| at.elapsed() > INTERRUPT_WINDOW)
        {
            self.interrupt = None;
        }
        if self
            .notice
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() > NOTICE_FOR)
        {
            self.notice = None;
        }
    }
}

/// The commands the TUI runs itself.
fn builtin_commands(can_undo: bool) -> Vec<CommandChoice> {
    let mut all = vec![
        ("new", "start a new session"),
        ("sessions", "switch to another session of this project"),
        ("compact", "summarize the session to free its context"),
        ("tree", "show the session tree"),
        ("thinking", "show or fold the models' reasoning"),
        ("exit", "quit"),
    ];
    if can_undo {
        all.insert(3, ("undo", "undo the last turn and its file changes"));
        all.insert(4, ("redo", "redo the last undone turn"));
    }
    all.into_iter()
        .map(|(name, description)| CommandChoice {
            name: name.into(),
            description: description.into(),
            builtin: true,
        })
        .collect()
}

#[cfg(test)]
mod tests;
