//! The panels drawn over the conversation: the session list, the tree, and the completion of
//! `/commands` and `@mentions` under the editor.

use crossterm::event::{KeyCode, KeyEvent};

use super::{App, Effect};

/// The open panel.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Overlay {
    /// None: the conversation and the editor have the keys.
    #[default]
    None,
    /// The project's sessions, newest first.
    Sessions {
        /// The selected row.
        selected: usize,
    },
    /// The open session's whole tree.
    Tree {
        /// The selected row.
        selected: usize,
    },
    /// Completion of what is typed.
    Completion(Completion),
}

/// What completion offers for the word at the cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The choices, best first.
    pub items: Vec<CompletionItem>,
    /// The selected choice.
    pub selected: usize,
    /// The word being completed (with its `/` or `@`).
    pub word: String,
}

/// One choice of a completion.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionItem {
    /// What is shown and inserted (`/review`, `@explore`, `@src/main.rs`).
    pub label: String,
    /// A description beside it.
    pub detail: String,
}

impl App {
    /// The word the cursor is in when it is a `/command` at the start of the prompt or an
    /// `@mention`.
    fn completion_word(&self) -> Option<String> {
        let (row, col) = self.editor.cursor();
        let line = self.editor.lines().get(row)?;
        let before: String = line.chars().take(col).collect();
        let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let word = &before[start..];
        let command = row == 0 && start == 0 && word.starts_with('/');
        (command || word.starts_with('@')).then(|| word.to_string())
    }

    /// The `@mention` being completed, without its `@`.
    pub fn completing_mention(&self) -> Option<String> {
        self.completion_word()
            .and_then(|w| w.strip_prefix('@').map(str::to_string))
    }

    /// Opens, updates or closes the completion for what is typed now; answers a file search
    /// to run when an `@mention` may be a file.
    pub fn refresh_completion(&mut self, files: &[String]) -> Vec<Effect> {
        let Some(word) = self.completion_word() else {
            if matches!(self.overlay, Overlay::Completion(_)) {
                self.overlay = Overlay::None;
            }
            return Vec::new();
        };
        if !matches!(self.overlay, Overlay::None | Overlay::Completion(_)) {
            return Vec::new();
        }
        let needle = word[1..].to_lowercase();
        let mut items: Vec<CompletionItem> = Vec::new();
        let mut effects = Vec::new();
        if let Some(name) = word.strip_prefix('/') {
            let _ = name;
            items.extend(
                self.commands
                    .iter()
                    .filter(|c| c.name.to_lowercase().contains(&needle))
                    .map(|c| CompletionItem {
                        label: format!("/{}", c.name),
                        detail: c.description.clone(),
                    }),
            );
        } else {
            items.extend(
                self.agents
                    .iter()
                    .filter(|a| a.name.to_lowercase().contains(&needle))
                    .map(|a| CompletionItem {
                        label: format!("@{}", a.name),
                        detail: if a.primary {
                            "agent".to_string()
                        } else {
                            "subagent".to_string()
                        },
                    }),
            );
            // Files found for an earlier query stay only while they still match.
            let matches = |f: &str| {
                let mut rest = f.chars().flat_map(char::to_lowercase);
                needle.chars().all(|c| rest.any(|p| p == c))
            };
            items.extend(
                files
                    .iter()
                    .filter(|f| matches(f))
                    .take(20)
                    .map(|f| CompletionItem {
                        label: format!("@{f}"),
                        detail: "file".to_string(),
                    }),
            );
            effects.push(Effect::FindFiles(word[1..].to_string()));
        }
        // Names that start with what is typed come first.
        items.sort_by_key(|i| !i.label[1..].to_lowercase().starts_with(&needle));
        let selected = match &self.overlay {
            Overlay::Completion(c) if c.word == word => {
                c.selected.min(items.len().saturating_sub(1))
            }
            _ => 0,
        };
        self.overlay = if items.is_empty() {
            Overlay::None
        } else {
            Overlay::Completion(Completion {
                items,
                selected,
                word,
            })
        };
        effects
    }

    /// Replaces the word at the cursor with the selected completion.
    fn accept_completion(&mut self) {
        let Overlay::Completion(completion) = std::mem::take(&mut self.overlay) else {
            return;
        };
        let Some(item) = completion.items.get(completion.selected) else {
            return;
        };
        for _ in 0..completion.word.chars().count() {
            self.editor.backspace();
        }
        self.editor.paste(&item.label);
        self.editor.insert(' ');
    }

    /// A key while a panel is open; `None` when the panel does not take it.
    pub(super) fn overlay_key(&mut self, key: &KeyEvent) -> Option<Vec<Effect>> {
        match &mut self.overlay {
            Overlay::None => None,
            Overlay::Completion(c) => match key.code {
                KeyCode::Up => {
                    c.selected = c.selected.checked_sub(1).unwrap_or(c.items.len() - 1);
                    Some(Vec::new())
                }
                KeyCode::Down => {
                    c.selected = (c.selected + 1) % c.items.len();
                    Some(Vec::new())
                }
                KeyCode::Tab | KeyCode::Enter => {
                    self.accept_completion();
                    Some(Vec::new())
                }
                KeyCode::Esc => {
                    self.overlay = Overlay::None;
                    Some(Vec::new())
                }
                _ => None,
            },
            Overlay::Sessions { selected } => {
                let selected = *selected;
                let ids: Vec<String> = self
                    .mirror
                    .roots()
                    .iter()
                    .map(|s| s.info.id.to_string())
                    .collect();
                Some(self.list_key(key, &ids, selected))
            }
            Overlay::Tree { selected } => {
                let selected = *selected;
                let ids: Vec<String> = self
                    .root()
                    .map(|r| self.mirror.tree_rows(&r))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| r.node.id)
                    .collect();
                Some(self.list_key(key, &ids, selected))
            }
        }
    }

    /// Up, Down, Enter and Esc in a list of sessions.
    fn list_key(&mut self, key: &KeyEvent, ids: &[String], selected: usize) -> Vec<Effect> {
        let last = ids.len().saturating_sub(1);
        let set = |app: &mut App, to: usize| {
            if let Overlay::Sessions { selected } | Overlay::Tree { selected } = &mut app.overlay {
                *selected = to;
            }
        };
        match key.code {
            KeyCode::Up => set(self, selected.checked_sub(1).unwrap_or(last)),
            KeyCode::Down => set(self, if selected >= last { 0 } else { selected + 1 }),
            KeyCode::Home => set(self, 0),
            KeyCode::End => set(self, last),
            KeyCode::Enter => {
                if let Some(id) = ids.get(selected) {
                    return self.open(id.clone());
                }
            }
            KeyCode::Esc => self.overlay = Overlay::None,
            _ => {}
        }
        Vec::new()
    }
}
