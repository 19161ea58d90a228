//! The names `[keybinds]` takes: OpenCode's actions (its TUI's and SDK's `KeybindsConfig`),
//! plus taskforce's own; a name outside them is a slip, reported with the closest name.

use indexmap::IndexMap;

/// OpenCode's keybind actions, as its SDK names them.
pub const OPENCODE_ACTIONS: &[&str] = &[
    "leader",
    "app_exit",
    "editor_open",
    "theme_list",
    "sidebar_toggle",
    "scrollbar_toggle",
    "username_toggle",
    "status_view",
    "session_export",
    "session_new",
    "session_list",
    "session_timeline",
    "session_fork",
    "session_rename",
    "session_delete",
    "stash_delete",
    "model_provider_list",
    "model_favorite_toggle",
    "session_share",
    "session_unshare",
    "session_interrupt",
    "session_compact",
    "messages_page_up",
    "messages_page_down",
    "messages_line_up",
    "messages_line_down",
    "messages_half_page_up",
    "messages_half_page_down",
    "messages_first",
    "messages_last",
    "messages_next",
    "messages_previous",
    "messages_last_user",
    "messages_copy",
    "messages_undo",
    "messages_redo",
    "messages_toggle_conceal",
    "tool_details",
    "model_list",
    "model_cycle_recent",
    "model_cycle_recent_reverse",
    "model_cycle_favorite",
    "model_cycle_favorite_reverse",
    "command_list",
    "agent_list",
    "agent_cycle",
    "agent_cycle_reverse",
    "variant_cycle",
    "input_clear",
    "input_paste",
    "input_submit",
    "input_newline",
    "input_move_left",
    "input_move_right",
    "input_move_up",
    "input_move_down",
    "input_select_left",
    "input_select_right",
    "input_select_up",
    "input_select_down",
    "input_line_home",
    "input_line_end",
    "input_select_line_home",
    "input_select_line_end",
    "input_visual_line_home",
    "input_visual_line_end",
    "input_select_visual_line_home",
    "input_select_visual_line_end",
    "input_buffer_home",
    "input_buffer_end",
    "input_select_buffer_home",
    "input_select_buffer_end",
    "input_delete_line",
    "input_delete_to_line_end",
    "input_delete_to_line_start",
    "input_backspace",
    "input_delete",
    "input_undo",
    "input_redo",
    "input_word_forward",
    "input_word_backward",
    "input_select_word_forward",
    "input_select_word_backward",
    "input_delete_word_forward",
    "input_delete_word_backward",
    "history_previous",
    "history_next",
    "session_child_cycle",
    "session_child_cycle_reverse",
    "session_parent",
    "terminal_suspend",
    "terminal_title_toggle",
    "tips_toggle",
    "display_thinking",
];

/// Actions only taskforce's TUI has.
pub const TASKFORCE_ACTIONS: &[&str] = &["session_tree"];

/// The default key of every action: OpenCode 1.1.65's for its actions, then taskforce's own
/// (`none` leaves an action unbound; `<leader>` stands for the `leader` key).
pub const DEFAULTS: &[(&str, &str)] = &[
    ("leader", "ctrl+x"),
    ("app_exit", "ctrl+c,ctrl+d,<leader>q"),
    ("editor_open", "<leader>e"),
    ("theme_list", "<leader>t"),
    ("sidebar_toggle", "<leader>b"),
    ("scrollbar_toggle", "none"),
    ("username_toggle", "none"),
    ("status_view", "<leader>s"),
    ("session_export", "<leader>x"),
    ("session_new", "<leader>n"),
    ("session_list", "<leader>l"),
    ("session_timeline", "<leader>g"),
    ("session_fork", "none"),
    ("session_rename", "ctrl+r"),
    ("session_delete", "ctrl+d"),
    ("stash_delete", "ctrl+d"),
    ("model_provider_list", "ctrl+a"),
    ("model_favorite_toggle", "ctrl+f"),
    ("session_share", "none"),
    ("session_unshare", "none"),
    ("session_interrupt", "escape"),
    ("session_compact", "<leader>c"),
    ("messages_page_up", "pageup,ctrl+alt+b"),
    ("messages_page_down", "pagedown,ctrl+alt+f"),
    ("messages_line_up", "ctrl+alt+y"),
    ("messages_line_down", "ctrl+alt+e"),
    ("messages_half_page_up", "ctrl+alt+u"),
    ("messages_half_page_down", "ctrl+alt+d"),
    ("messages_first", "ctrl+g,home"),
    ("messages_last", "ctrl+alt+g,end"),
    ("messages_next", "none"),
    ("messages_previous", "none"),
    ("messages_last_user", "none"),
    ("messages_copy", "<leader>y"),
    ("messages_undo", "<leader>u"),
    ("messages_redo", "<leader>r"),
    ("messages_toggle_conceal", "<leader>h"),
    ("tool_details", "none"),
    ("model_list", "<leader>m"),
    ("model_cycle_recent", "f2"),
    ("model_cycle_recent_reverse", "shift+f2"),
    ("model_cycle_favorite", "none"),
    ("model_cycle_favorite_reverse", "none"),
    ("command_list", "ctrl+p"),
    ("agent_list", "<leader>a"),
    ("agent_cycle", "tab"),
    ("agent_cycle_reverse", "shift+tab"),
    ("variant_cycle", "ctrl+t"),
    ("input_clear", "ctrl+c"),
    ("input_paste", "ctrl+v"),
    ("input_submit", "return"),
    (
        "input_newline",
        "shift+return,ctrl+return,alt+return,ctrl+j",
    ),
    ("input_move_left", "left,ctrl+b"),
    ("input_move_right", "right,ctrl+f"),
    ("input_move_up", "up"),
    ("input_move_down", "down"),
    ("input_select_left", "shift+left"),
    ("input_select_right", "shift+right"),
    ("input_select_up", "shift+up"),
    ("input_select_down", "shift+down"),
    ("input_line_home", "ctrl+a"),
    ("input_line_end", "ctrl+e"),
    ("input_select_line_home", "ctrl+shift+a"),
    ("input_select_line_end", "ctrl+shift+e"),
    ("input_visual_line_home", "alt+a"),
    ("input_visual_line_end", "alt+e"),
    ("input_select_visual_line_home", "alt+shift+a"),
    ("input_select_visual_line_end", "alt+shift+e"),
    ("input_buffer_home", "home"),
    ("input_buffer_end", "end"),
    ("input_select_buffer_home", "shift+home"),
    ("input_select_buffer_end", "shift+end"),
    ("input_delete_line", "ctrl+shift+d"),
    ("input_delete_to_line_end", "ctrl+k"),
    ("input_delete_to_line_start", "ctrl+u"),
    ("input_backspace", "backspace,shift+backspace"),
    ("input_delete", "ctrl+d,delete,shift+delete"),
    ("input_undo", "ctrl+-,super+z"),
    ("input_redo", "ctrl+.,super+shift+z"),
    ("input_word_forward", "alt+f,alt+right,ctrl+right"),
    ("input_word_backward", "alt+b,alt+left,ctrl+left"),
    ("input_select_word_forward", "alt+shift+f,alt+shift+right"),
    ("input_select_word_backward", "alt+shift+b,alt+shift+left"),
    ("input_delete_word_forward", "alt+d,alt+delete,ctrl+delete"),
    (
        "input_delete_word_backward",
        "ctrl+w,ctrl+backspace,alt+backspace",
    ),
    ("history_previous", "up"),
    ("history_next", "down"),
    ("session_child_cycle", "<leader>right"),
    ("session_child_cycle_reverse", "<leader>left"),
    ("session_parent", "<leader>up"),
    ("terminal_suspend", "ctrl+z"),
    ("terminal_title_toggle", "none"),
    ("tips_toggle", "<leader>h"),
    ("display_thinking", "none"),
    ("session_tree", "<leader>t"),
];

/// Every action's key: the defaults with `configured` (the `[keybinds]` table) laid over them,
/// in the defaults' order; names that are not actions are left out.
pub fn with_defaults(configured: &IndexMap<String, String>) -> IndexMap<String, String> {
    DEFAULTS
        .iter()
        .map(|(name, key)| {
            let key = configured.get(*name).map_or(*key, String::as_str);
            (name.to_string(), key.to_string())
        })
        .collect()
}

/// Whether `name` is a keybind action.
pub fn is_action(name: &str) -> bool {
    OPENCODE_ACTIONS.contains(&name) || TASKFORCE_ACTIONS.contains(&name)
}

/// Every action name.
pub fn actions() -> impl Iterator<Item = &'static str> {
    OPENCODE_ACTIONS.iter().chain(TASKFORCE_ACTIONS).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencodes_actions_and_our_own_are_known_and_slips_are_not() {
        assert_eq!(OPENCODE_ACTIONS.len(), 94);
        assert!(is_action("session_child_cycle"));
        assert!(is_action("session_tree"));
        assert!(!is_action("session_parnt"));
    }

    #[test]
    fn every_action_has_a_default_in_the_order_of_the_names() {
        let names: Vec<&str> = DEFAULTS.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, actions().collect::<Vec<_>>());
        let defaults: IndexMap<&str, &str> = DEFAULTS.iter().copied().collect();
        assert_eq!(defaults["session_parent"], "<leader>up");
        assert_eq!(defaults["session_child_cycle"], "<leader>right");
        assert_eq!(defaults["session_tree"], "<leader>t");
    }

    #[test]
    fn configured_keys_replace_the_defaults_and_unknown_names_are_dropped() {
        let configured: IndexMap<String, String> = [
            ("session_parent".to_string(), "ctrl+up".to_string()),
            ("not_an_action".to_string(), "x".to_string()),
        ]
        .into_iter()
        .collect();
        let merged = with_defaults(&configured);
        assert_eq!(merged.len(), DEFAULTS.len());
        assert_eq!(merged["session_parent"], "ctrl+up");
        assert_eq!(merged["leader"], "ctrl+x");
        assert!(!merged.contains_key("not_an_action"));
    }
}
