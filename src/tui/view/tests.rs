//! Snapshots of the drawn screen (ratatui's test backend) at 80×24.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use taskforce_actors::bus::{Event, SessionStatus};

use crate::tui::app::App;
use crate::tui::fixtures::{assistant, events, part, session, task_call, user};
use crate::tui::keys::Keybinds;
use crate::tui::view::theme::Theme;

fn screen(app: &App, width: u16, height: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| super::draw(frame, app, 5_000, 0))
        .unwrap();
    let buffer = terminal.backend().buffer().clone();
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buffer[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn conversation() -> App {
    let mut app = App::new("/p".into(), Keybinds::default(), Theme::plain(), Vec::new());
    app.set_agents(&[json!({"name": "build", "mode": "primary"})]);
    app.connected = true;
    app.mirror
        .put_session(session("ses_root", None, "Fix the parser"));
    app.mirror
        .put_session(session("ses_child", Some("ses_root"), "look around"));
    app.mirror.put_messages("ses_root", Vec::new());
    app.mirror.put_messages("ses_child", Vec::new());
    let mut all = events(
        user("ses_root", "msg_1"),
        vec![part(
            "ses_root",
            "msg_1",
            "prt_1",
            json!({"type": "text", "text": "why does it fail?"}),
        )],
    );
    all.extend(events(
        assistant("ses_root", "msg_2", "build", 0.01),
        vec![
            part("ses_root", "msg_2", "prt_2", json!({"type": "reasoning", "text": "Let me think.\nMore.", "time": {"start": 1}})),
            part("ses_root", "msg_2", "prt_3", json!({"type": "text", "text": "It **fails** on `None`:\n\n- first\n- second"})),
            part("ses_root", "msg_2", "prt_4", json!({"type": "tool", "callID": "c0", "tool": "bash", "state": {
                "status": "completed", "input": {"command": "cargo test"}, "output": "ok", "title": "cargo test",
                "metadata": {}, "time": {"start": 1, "end": 2}}})),
            task_call("ses_root", "msg_2", "prt_5", "ses_child"),
        ],
    ));
    all.extend(events(
        assistant("ses_child", "msg_3", "explore", 0.02),
        vec![part(
            "ses_child",
            "msg_3",
            "prt_6",
            json!({"type": "tool", "callID": "c1", "tool": "grep", "state": {
            "status": "running", "input": {"pattern": "unwrap"}, "time": {"start": 2000}}}),
        )],
    ));
    all.push(Event::SessionStatus {
        session_id: "ses_child".parse().unwrap(),
        status: SessionStatus::Busy,
    });
    for e in all {
        app.apply(&e);
    }
    app.current = Some("ses_root".into());
    app
}

#[test]
fn the_conversation_shows_prompt_answer_tools_and_a_live_task_card_at_80_by_24() {
    let app = conversation();
    let lines = screen(&app, 80, 24);
    let expected = [
        "build  Fix the parser",
        "",
        "▌ why does it fail?",
        "",
        "build · p/m",
        "▸ thinking (2 lines) Let me think.",
        "It fails on None:",
        "",
        "• first",
        "• second",
        "✓ bash cargo test",
        "╭─ task · explore ───────────────────────────────────────────────────────────╮",
        "│ look around                                                                │",
        "│ running · grep                                                             │",
        "│ 4.0s · 15 tokens · $0.0200                                                 │",
        "╰─────────────────────────────────────────────────────────────── enter: open ╯",
        "",
        "⠋ working  esc twice to interrupt",
        "",
        "",
        "┌ build ───────────────────────────────────────────────────────────────────────┐",
        "│ask anything… (/ for commands, @ for agents and files)                        │",
        "└──────────────────────────────────────────────────────────────────────────────┘",
        "ctrl+x t tree · ctrl+x l sessions                  build · ctx 10 · tree $0.0300",
    ];
    assert_eq!(lines, expected, "\n{}", lines.join("\n"));
}

#[test]
fn the_tree_panel_lists_every_node_with_own_and_rolled_up_cost() {
    let mut app = conversation();
    app.overlay = crate::tui::app::Overlay::Tree { selected: 1 };
    let lines = screen(&app, 80, 24);
    let text = lines.join("\n");
    assert!(
        text.contains("○ build $0.0100 / $0.0300 running task  Fix the parser"),
        "{text}"
    );
    assert!(
        text.contains("  ● explore $0.0200 running grep  look around"),
        "{text}"
    );
}

#[test]
fn a_child_session_shows_its_path_of_agents_and_its_own_agent_in_the_editor() {
    let mut app = conversation();
    app.open("ses_child".into());
    let lines = screen(&app, 80, 24);
    assert_eq!(lines[0], "build › explore  look around");
    assert!(
        lines.iter().any(|l| l.starts_with("┌ explore ")),
        "{}",
        lines.join("\n")
    );
}

#[test]
fn a_narrow_terminal_still_draws_without_losing_the_editor_or_footer() {
    let app = conversation();
    let lines = screen(&app, 40, 12);
    assert!(lines[8].starts_with("┌ build"), "{}", lines.join("\n"));
    assert!(lines[11].contains("tree $0.0300"), "{}", lines.join("\n"));
}

#[test]
fn the_footer_shows_how_full_the_context_is_when_the_window_is_known() {
    let mut app = conversation();
    app.set_config(
        &json!({"model": "p/m", "provider": {"p": {"models": {"m": {"limit": {"context": 200}}}}}}),
    );
    let lines = screen(&app, 80, 24);
    assert!(
        lines[23].ends_with("build · p/m · ctx 10 (5%) · tree $0.0300"),
        "{}",
        lines[23]
    );
}

#[test]
fn reasoning_is_folded_to_one_line_until_shown_whole() {
    let mut app = conversation();
    let folded = screen(&app, 80, 24).join("\n");
    assert!(
        folded.contains("▸ thinking (2 lines) Let me think."),
        "{folded}"
    );
    assert!(!folded.contains("  More."), "{folded}");
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    for c in "/thinking".chars() {
        app.on_key(&key(KeyCode::Char(c)), &[]);
    }
    app.on_key(&key(KeyCode::Esc), &[]);
    assert!(app.on_key(&key(KeyCode::Enter), &[]).is_empty());
    let shown = screen(&app, 80, 24).join("\n");
    assert!(
        shown.contains("▾ thinking\n  Let me think.\n  More."),
        "{shown}"
    );
}
