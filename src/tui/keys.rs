//! Keybinds under OpenCode's names (`session_child_cycle = "<leader>right"`): the defaults, the
//! `[keybinds]` overrides, and matching a key press (after the leader or not) to an action.

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The actions this TUI binds, by their OpenCode names; their default keys are OpenCode's (and
/// taskforce's own `session_tree`), from the configuration's table.
pub const USED: &[&str] = &[
    "leader",
    "app_exit",
    "session_new",
    "session_list",
    "session_tree",
    "session_interrupt",
    "session_compact",
    "session_child_cycle",
    "session_child_cycle_reverse",
    "session_parent",
    "messages_page_up",
    "messages_page_down",
    "messages_first",
    "messages_last",
    "agent_cycle",
    "agent_cycle_reverse",
    "command_list",
    "input_clear",
    "input_submit",
    "input_newline",
    "history_previous",
    "history_next",
    "display_thinking",
];

/// The default keys of the actions this TUI binds.
fn defaults() -> impl Iterator<Item = (&'static str, &'static str)> {
    taskforce_agents::config::keybinds::DEFAULTS
        .iter()
        .filter(|(name, _)| USED.contains(name))
        .copied()
}

/// One key with its modifiers, maybe after the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Chord {
    /// Whether the leader must come first.
    pub leader: bool,
    /// The key.
    pub code: KeyCode,
    /// Ctrl, alt and shift.
    pub modifiers: KeyModifiers,
}

/// A keybind that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// A name that is no action.
    #[error("keybinds.{0}: no such action (known: {1})")]
    UnknownAction(String, String),
    /// A key that cannot be read.
    #[error("keybinds.{action}: cannot read key `{key}`")]
    BadKey {
        /// The action.
        action: String,
        /// The key as written.
        key: String,
    },
}

/// Reads one key such as `ctrl+x`, `<leader>right`, `shift+tab` or `f2`.
pub fn parse_chord(text: &str) -> Option<Chord> {
    let mut rest = text.trim().to_ascii_lowercase();
    let leader = rest.starts_with("<leader>");
    if leader {
        rest = rest["<leader>".len()..].to_string();
    }
    let mut modifiers = KeyModifiers::NONE;
    let mut parts: Vec<&str> = rest.split('+').collect();
    let key = parts.pop()?;
    for part in parts {
        modifiers |= match part {
            "ctrl" => KeyModifiers::CONTROL,
            "alt" | "meta" | "option" => KeyModifiers::ALT,
            "shift" => KeyModifiers::SHIFT,
            "super" | "cmd" => KeyModifiers::SUPER,
            _ => return None,
        };
    }
    let code = match key {
        "return" | "enter" => KeyCode::Enter,
        "escape" | "esc" => KeyCode::Esc,
        "tab" if modifiers.contains(KeyModifiers::SHIFT) => {
            modifiers.remove(KeyModifiers::SHIFT);
            KeyCode::BackTab
        }
        "tab" => KeyCode::Tab,
        "backspace" => KeyCode::Backspace,
        "delete" => KeyCode::Delete,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "pageup" => KeyCode::PageUp,
        "pagedown" => KeyCode::PageDown,
        "space" => KeyCode::Char(' '),
        f if f.len() > 1 && f.starts_with('f') => KeyCode::F(f[1..].parse().ok()?),
        c if c.chars().count() == 1 => KeyCode::Char(c.chars().next()?),
        _ => return None,
    };
    Some(Chord {
        leader,
        code,
        modifiers,
    })
}

/// The keys of every action.
#[derive(Debug, Clone)]
pub struct Keybinds {
    leader: Option<Chord>,
    bound: HashMap<&'static str, Vec<Chord>>,
}

impl Default for Keybinds {
    fn default() -> Self {
        match Keybinds::new(&[]) {
            Ok(keys) => keys,
            // The defaults read (a unit test checks them).
            Err(_) => Keybinds {
                leader: None,
                bound: HashMap::new(),
            },
        }
    }
}

impl Keybinds {
    /// The defaults with `overrides` (`("session_parent", "<leader>k")`, `"none"` unbinds).
    pub fn new(overrides: &[(String, String)]) -> Result<Keybinds, KeyError> {
        let mut texts: HashMap<&'static str, String> = defaults()
            .map(|(name, keys)| (name, keys.to_string()))
            .collect();
        for (name, keys) in overrides {
            let Some(known) = USED.iter().copied().find(|n| n == name) else {
                // OpenCode's other actions (themes, sidebar…) have no meaning here.
                if taskforce_agents::config::keybinds::is_action(name) {
                    continue;
                }
                return Err(KeyError::UnknownAction(name.clone(), USED.join(", ")));
            };
            texts.insert(known, keys.clone());
        }
        let mut bound = HashMap::new();
        let mut leader = None;
        for (name, text) in texts {
            let mut chords = Vec::new();
            for key in text.split(',').map(str::trim).filter(|k| !k.is_empty()) {
                if key == "none" {
                    continue;
                }
                let chord = parse_chord(key).ok_or_else(|| KeyError::BadKey {
                    action: name.to_string(),
                    key: key.to_string(),
                })?;
                chords.push(chord);
            }
            if name == "leader" {
                leader = chords.first().copied();
            } else {
                bound.insert(name, chords);
            }
        }
        Ok(Keybinds { leader, bound })
    }

    /// Whether `key` is the leader.
    pub fn is_leader(&self, key: &KeyEvent) -> bool {
        self.leader
            .is_some_and(|l| chord_matches(&l, key, false) || chord_matches(&l, key, true))
    }

    /// Whether `key` (right after the leader when `after_leader`) triggers `action`.
    pub fn matches(&self, action: &str, key: &KeyEvent, after_leader: bool) -> bool {
        self.bound
            .get(action)
            .is_some_and(|chords| chords.iter().any(|c| chord_matches(c, key, after_leader)))
    }

    /// How the leader is typed (`ctrl+x`).
    pub fn leader_text(&self) -> String {
        self.leader
            .map_or_else(|| "leader".to_string(), |l| chord_text(&l))
    }

    /// How `action` is typed, for hints (`ctrl+x right`).
    pub fn describe(&self, action: &str) -> String {
        let Some(chord) = self.bound.get(action).and_then(|c| c.first()) else {
            return "unbound".to_string();
        };
        let mut text = String::new();
        if chord.leader
            && let Some(leader) = self.leader
        {
            text.push_str(&chord_text(&leader));
            text.push(' ');
        }
        text.push_str(&chord_text(chord));
        text
    }
}

fn chord_matches(chord: &Chord, key: &KeyEvent, after_leader: bool) -> bool {
    if chord.leader != after_leader {
        return false;
    }
    // Terminals report shifted characters with SHIFT; the character already says it.
    let mut modifiers = key.modifiers;
    if matches!(key.code, KeyCode::Char(_) | KeyCode::BackTab) {
        modifiers.remove(KeyModifiers::SHIFT);
    }
    let code = match key.code {
        KeyCode::Char(c) if c.is_ascii_uppercase() && chord.modifiers.is_empty() => {
            KeyCode::Char(c)
        }
        KeyCode::Char(c) => KeyCode::Char(c.to_ascii_lowercase()),
        other => other,
    };
    code == chord.code && modifiers == chord.modifiers
}

fn chord_text(chord: &Chord) -> String {
    let mut text = String::new();
    for (flag, name) in [
        (KeyModifiers::CONTROL, "ctrl+"),
        (KeyModifiers::ALT, "alt+"),
        (KeyModifiers::SHIFT, "shift+"),
        (KeyModifiers::SUPER, "super+"),
    ] {
        if chord.modifiers.contains(flag) {
            text.push_str(name);
        }
    }
    let key = match chord.code {
        KeyCode::Enter => "enter".to_string(),
        KeyCode::Esc => "esc".to_string(),
        KeyCode::Tab => "tab".to_string(),
        KeyCode::BackTab => "shift+tab".to_string(),
        KeyCode::Up => "up".to_string(),
        KeyCode::Down => "down".to_string(),
        KeyCode::Left => "left".to_string(),
        KeyCode::Right => "right".to_string(),
        KeyCode::Home => "home".to_string(),
        KeyCode::End => "end".to_string(),
        KeyCode::PageUp => "pageup".to_string(),
        KeyCode::PageDown => "pagedown".to_string(),
        KeyCode::F(n) => format!("f{n}"),
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        other => format!("{other:?}").to_ascii_lowercase(),
    };
    text.push_str(&key);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn every_default_key_reads_and_every_used_action_has_one() {
        for (name, keys) in taskforce_agents::config::keybinds::DEFAULTS {
            for k in keys.split(',').filter(|k| *k != "none") {
                assert!(parse_chord(k).is_some(), "{name}: {k}");
            }
        }
        assert_eq!(defaults().count(), USED.len());
        let keys = Keybinds::new(&[]).unwrap();
        assert_eq!(keys.describe("session_child_cycle"), "ctrl+x right");
        assert_eq!(keys.describe("agent_cycle_reverse"), "shift+tab");
    }

    #[test]
    fn the_leader_then_an_arrow_cycles_children_and_the_arrow_alone_does_not() {
        let keys = Keybinds::default();
        assert!(keys.is_leader(&key(KeyCode::Char('x'), KeyModifiers::CONTROL)));
        let right = key(KeyCode::Right, KeyModifiers::NONE);
        assert!(keys.matches("session_child_cycle", &right, true));
        assert!(!keys.matches("session_child_cycle", &right, false));
        let up = key(KeyCode::Up, KeyModifiers::NONE);
        assert!(keys.matches("session_parent", &up, true));
        assert!(keys.matches("history_previous", &up, false));
    }

    #[test]
    fn overrides_rebind_unbind_and_name_what_is_wrong() {
        let keys = Keybinds::new(&[
            ("session_parent".into(), "<leader>k".into()),
            ("session_compact".into(), "none".into()),
            ("theme_list".into(), "<leader>t".into()),
        ])
        .unwrap();
        assert!(keys.matches(
            "session_parent",
            &key(KeyCode::Char('k'), KeyModifiers::NONE),
            true
        ));
        assert_eq!(keys.describe("session_compact"), "unbound");
        let error = Keybinds::new(&[("sesion_parent".into(), "up".into())]).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("keybinds.sesion_parent: no such action")
        );
        let error = Keybinds::new(&[("session_parent".into(), "ctrl+banana".into())]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "keybinds.session_parent: cannot read key `ctrl+banana`"
        );
    }

    #[test]
    fn shift_tab_is_the_back_tab_terminals_send() {
        let keys = Keybinds::default();
        for modifiers in [KeyModifiers::SHIFT, KeyModifiers::NONE] {
            let back_tab = key(KeyCode::BackTab, modifiers);
            assert!(keys.matches("agent_cycle_reverse", &back_tab, false));
            assert!(!keys.matches("agent_cycle", &back_tab, false));
        }
    }
}
