//! The names `[keybinds]` takes: OpenCode's actions (its TUI's and SDK's `KeybindsConfig`),
//! plus taskforce's own; a name outside them is a slip, reported with the closest name.

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
}
