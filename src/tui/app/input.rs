//! What a key press or a paste does: leader actions, panels, the ask on screen, interrupting,
//! switching agents, scrolling, editing, and sending the prompt.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use taskforce_actors::bus::Event;
use taskforce_actors::permission::PermissionReply;

use super::{App, Effect, Overlay};

/// The answers of an ask, in the order they are offered.
pub const ASK_CHOICES: [PermissionReply; 3] = [
    PermissionReply::Once,
    PermissionReply::Always,
    PermissionReply::Reject,
];

impl App {
    /// Handles one key press; answers what the server must do.
    pub fn on_key(&mut self, key: &KeyEvent, files: &[String]) -> Vec<Effect> {
        if self.leader.take().is_some() {
            return self.leader_key(key);
        }
        if self.keys.is_leader(key) {
            self.leader = Some(Instant::now());
            return Vec::new();
        }
        if let Some(effects) = self.overlay_key(key) {
            return effects;
        }
        if self.ask().is_some()
            && let Some(effects) = self.ask_key(key)
        {
            return effects;
        }
        if self.ask().is_none()
            && let Some(effects) = self.question_key(key)
        {
            return effects;
        }
        let effects = self.main_key(key);
        let mut more = self.refresh_completion(files);
        more.extend(effects);
        more
    }

    /// Handles pasted text: it goes into the editor as is.
    pub fn on_paste(&mut self, text: &str) {
        self.editor.paste(text);
    }

    fn leader_key(&mut self, key: &KeyEvent) -> Vec<Effect> {
        let keys = self.keys.clone();
        let is = |action: &str| keys.matches(action, key, true);
        if is("app_exit") {
            self.quit = true;
        } else if is("session_new") {
            self.new_session();
        } else if is("session_list") {
            self.overlay = Overlay::Sessions { selected: 0 };
            return vec![Effect::ListSessions];
        } else if is("session_tree") {
            return self.open_tree();
        } else if is("session_compact") {
            return self.compact();
        } else if is("session_child_cycle") || is("session_child_cycle_reverse") {
            let forward = is("session_child_cycle");
            let next = self
                .current
                .as_deref()
                .and_then(|c| self.mirror.cycle_child(c, forward));
            match next {
                Some(id) => return self.open(id),
                None => self.notify("no child sessions here"),
            }
        } else if is("session_parent") {
            match self
                .current
                .as_deref()
                .and_then(|c| self.mirror.parent_of(c))
            {
                Some(id) => return self.open(id),
                None => self.notify("this is the root session"),
            }
        }
        Vec::new()
    }

    fn ask_key(&mut self, key: &KeyEvent) -> Option<Vec<Effect>> {
        let reply = match key.code {
            KeyCode::Left => {
                self.ask_choice = self.ask_choice.checked_sub(1).unwrap_or(2);
                return Some(Vec::new());
            }
            KeyCode::Right => {
                self.ask_choice = (self.ask_choice + 1) % 3;
                return Some(Vec::new());
            }
            KeyCode::Enter => ASK_CHOICES[self.ask_choice.min(2)],
            KeyCode::Char('o' | '1') => PermissionReply::Once,
            KeyCode::Char('a' | '2') => PermissionReply::Always,
            KeyCode::Char('r' | '3') => PermissionReply::Reject,
            _ => return None,
        };
        let id = self.ask()?.id.to_string();
        self.ask_choice = 0;
        Some(vec![Effect::Reply(id, reply)])
    }

    fn main_key(&mut self, key: &KeyEvent) -> Vec<Effect> {
        let keys = self.keys.clone();
        let is = |action: &str| keys.matches(action, key, false);
        if is("input_clear") && !self.editor.is_empty() {
            self.editor.clear();
            return Vec::new();
        }
        if is("app_exit") && (self.editor.is_empty() || key.code != KeyCode::Char('d')) {
            self.quit = true;
            return Vec::new();
        }
        if is("session_interrupt") {
            return self.interrupt();
        }
        if (is("agent_cycle") || is("agent_cycle_reverse")) && !self.in_child() {
            self.cycle_agent(is("agent_cycle"));
            return Vec::new();
        }
        if is("display_thinking") {
            self.toggle_thinking();
            return Vec::new();
        }
        if is("command_list") {
            self.editor.set_text("/");
            return Vec::new();
        }
        if is("messages_page_up") {
            self.scroll = self.scroll.saturating_add(10);
        } else if is("messages_page_down") {
            self.scroll = self.scroll.saturating_sub(10);
        } else if is("messages_first") {
            self.scroll = usize::MAX / 2;
        } else if is("messages_last") {
            self.scroll = 0;
        } else if is("input_newline") {
            self.editor.newline();
        } else if is("input_submit") {
            return self.submit();
        } else if key.modifiers.contains(KeyModifiers::ALT) && key.code == KeyCode::Up {
            let cards = self.task_children().len();
            self.card = (self.card + 1).min(cards.saturating_sub(1));
        } else if key.modifiers.contains(KeyModifiers::ALT) && key.code == KeyCode::Down {
            self.card = self.card.saturating_sub(1);
        } else if is("history_previous") {
            self.editor.up();
        } else if is("history_next") {
            self.editor.down();
        } else {
            self.edit(key);
        }
        Vec::new()
    }

    fn edit(&mut self, key: &KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('w') if ctrl => self.editor.delete_word(),
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Char('u') if ctrl => self.editor.clear(),
            KeyCode::Char(c) if !ctrl => self.editor.insert(c),
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            _ => {}
        }
    }

    fn interrupt(&mut self) -> Vec<Effect> {
        if !self.tree_busy() {
            self.interrupt = None;
            return Vec::new();
        }
        if self.interrupt.take().is_some() {
            self.notify("interrupted");
            return self.root().map(Effect::Abort).into_iter().collect();
        }
        self.interrupt = Some(Instant::now());
        self.notify(format!(
            "press {} again to interrupt",
            self.keys.describe("session_interrupt")
        ));
        Vec::new()
    }

    fn toggle_thinking(&mut self) {
        self.show_thinking = !self.show_thinking;
        self.notify(if self.show_thinking {
            "reasoning shown"
        } else {
            "reasoning folded"
        });
    }

    fn cycle_agent(&mut self, forward: bool) {
        let primary: Vec<usize> = (0..self.agents.len())
            .filter(|i| self.agents[*i].primary)
            .collect();
        if primary.len() < 2 {
            return;
        }
        let at = primary.iter().position(|i| *i == self.agent).unwrap_or(0);
        let next = if forward {
            (at + 1) % primary.len()
        } else {
            (at + primary.len() - 1) % primary.len()
        };
        self.agent = primary[next];
    }

    fn new_session(&mut self) {
        self.current = None;
        self.scroll = 0;
        self.overlay = Overlay::None;
        self.notify("new session: the first prompt starts it");
    }

    /// Opens the tree panel; loads the sessions of the tree not loaded yet, so that their
    /// costs count.
    fn open_tree(&mut self) -> Vec<Effect> {
        let Some(root) = self.root() else {
            self.notify("no session yet");
            return Vec::new();
        };
        let rows = self.mirror.tree_rows(&root);
        let selected = rows
            .iter()
            .position(|r| Some(&r.node.id) == self.current.as_ref())
            .unwrap_or(0);
        self.overlay = Overlay::Tree { selected };
        rows.into_iter()
            .filter(|r| self.mirror.session(&r.node.id).is_some_and(|s| !s.loaded))
            .map(|r| Effect::Load(r.node.id))
            .collect()
    }

    fn compact(&mut self) -> Vec<Effect> {
        match self.current.clone() {
            Some(id) => {
                self.notify("compacting…");
                vec![Effect::Compact(id)]
            }
            None => {
                self.notify("no session to compact");
                Vec::new()
            }
        }
    }

    /// Enter: sends the prompt or runs the command; on an empty editor, opens the selected task
    /// card's child.
    fn submit(&mut self) -> Vec<Effect> {
        if self.editor.is_empty() {
            if let Some(child) = self.task_children().get(self.card).cloned() {
                return self.open(child);
            }
            return Vec::new();
        }
        let text = self.editor.take();
        // A child's prompt runs its own agent (the server knows it); Tab picks the root's.
        let agent = if self.in_child() {
            None
        } else {
            self.agent_name().map(str::to_string)
        };
        let session = self.current.clone();
        self.scroll = 0;
        let Some(line) = text.strip_prefix('/') else {
            return vec![Effect::Prompt {
                session,
                text,
                agent,
            }];
        };
        let (name, arguments) = line
            .split_once(char::is_whitespace)
            .map_or((line, ""), |(n, a)| (n, a.trim()));
        match name {
            "new" => self.new_session(),
            "sessions" => {
                self.overlay = Overlay::Sessions { selected: 0 };
                return vec![Effect::ListSessions];
            }
            "compact" | "summarize" => return self.compact(),
            "tree" => return self.open_tree(),
            "thinking" => self.toggle_thinking(),
            "exit" | "quit" => self.quit = true,
            "undo" => match session {
                Some(id) if self.commands.iter().any(|c| c.name == "undo") => {
                    return vec![Effect::Undo(id)];
                }
                Some(_) => self.notify("this server cannot undo a turn"),
                None => self.notify("nothing to undo"),
            },
            "redo" => match session {
                Some(id) if self.commands.iter().any(|c| c.name == "redo") => {
                    return vec![Effect::Redo(id)];
                }
                Some(_) => self.notify("this server cannot redo a turn"),
                None => self.notify("nothing to redo"),
            },
            _ if self.commands.iter().any(|c| c.name == name && !c.builtin) => {
                return vec![Effect::Command {
                    session,
                    name: name.to_string(),
                    arguments: arguments.to_string(),
                    agent,
                }];
            }
            _ => self.notify(format!("no command /{name}")),
        }
        Vec::new()
    }
}

impl App {
    /// What a script or an editor plugin asks of attached TUIs (`/tui/*` on the server): fill
    /// or send the prompt, run a command, show a toast, open a session.
    pub(super) fn remote(&mut self, event: &Event) -> Vec<Effect> {
        match event {
            Event::TuiPromptAppend { text } => self.editor.paste(text),
            Event::TuiToastShow { title, message, .. } => match title {
                Some(title) => self.notify(format!("{title}: {message}")),
                None => self.notify(message.clone()),
            },
            Event::TuiSessionSelect { session_id } => {
                return self.open(session_id.to_string());
            }
            Event::TuiCommandExecute { command } => match command.as_str() {
                "prompt.submit" => return self.submit(),
                "prompt.clear" => self.editor.clear(),
                "session.new" => self.new_session(),
                "session.interrupt" => return self.interrupt(),
                "session.compact" => return self.compact(),
                "session.list" => {
                    self.overlay = Overlay::Sessions { selected: 0 };
                    return vec![Effect::ListSessions];
                }
                "agent.cycle" => self.cycle_agent(true),
                other => {
                    tracing::debug!("a remote TUI command taskforce's TUI does not have: {other}")
                }
            },
            _ => {}
        }
        Vec::new()
    }
}
