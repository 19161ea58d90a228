use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use taskforce_actors::bus::{Event, SessionStatus};
use taskforce_actors::permission::PermissionReply;

use super::{App, Effect, Overlay};
use crate::tui::fixtures::{assistant, events, session, task_call, user};
use crate::tui::keys::Keybinds;
use crate::tui::view::theme::Theme;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn typed(app: &mut App, text: &str) -> Vec<Effect> {
    let mut effects = Vec::new();
    for c in text.chars() {
        effects.extend(app.on_key(&key(KeyCode::Char(c)), &[]));
    }
    effects
}

/// A root with a task card whose child `ses_child` runs, the root open.
fn app() -> App {
    let mut app = App::new("/p".into(), Keybinds::default(), Theme::plain(), Vec::new());
    app.set_agents(&[
        json!({"name": "build", "mode": "primary"}),
        json!({"name": "plan", "mode": "primary"}),
        json!({"name": "explore", "mode": "subagent"}),
    ]);
    app.set_commands(
        &[json!({"name": "review", "description": "review the diff"})],
        false,
    );
    app.mirror.put_session(session("ses_root", None, "root"));
    app.mirror
        .put_session(session("ses_child", Some("ses_root"), "child"));
    app.mirror.put_messages("ses_root", Vec::new());
    for e in events(user("ses_root", "msg_1"), Vec::new())
        .into_iter()
        .chain(events(
            assistant("ses_root", "msg_2", "build", 0.0),
            vec![task_call("ses_root", "msg_2", "prt_1", "ses_child")],
        ))
    {
        app.apply(&e);
    }
    app.current = Some("ses_root".into());
    app
}

#[test]
fn the_leader_and_arrows_move_into_a_child_and_back_loading_what_is_not_loaded() {
    let mut app = app();
    assert!(app.on_key(&ctrl('x'), &[]).is_empty());
    let effects = app.on_key(&key(KeyCode::Right), &[]);
    assert_eq!(app.current.as_deref(), Some("ses_child"));
    assert_eq!(effects, [Effect::Load("ses_child".into())]);
    // Without the leader an arrow is the editor's.
    app.on_key(&key(KeyCode::Up), &[]);
    assert_eq!(app.current.as_deref(), Some("ses_child"));
    app.on_key(&ctrl('x'), &[]);
    let effects = app.on_key(&key(KeyCode::Up), &[]);
    assert_eq!(app.current.as_deref(), Some("ses_root"));
    assert!(effects.is_empty(), "the root is loaded");
    app.on_key(&ctrl('x'), &[]);
    app.on_key(&key(KeyCode::Up), &[]);
    assert_eq!(app.notice(), Some("this is the root session"));
}

#[test]
fn enter_on_an_empty_editor_opens_the_task_cards_child() {
    let mut app = app();
    assert_eq!(app.task_children(), ["ses_child"]);
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(app.current.as_deref(), Some("ses_child"));
    assert_eq!(effects, [Effect::Load("ses_child".into())]);
}

#[test]
fn esc_interrupts_a_busy_tree_only_when_pressed_twice() {
    let mut app = app();
    assert!(
        app.on_key(&key(KeyCode::Esc), &[]).is_empty(),
        "nothing runs"
    );
    app.apply(&Event::SessionStatus {
        session_id: "ses_child".parse().unwrap(),
        status: SessionStatus::Busy,
    });
    assert!(app.on_key(&key(KeyCode::Esc), &[]).is_empty());
    assert_eq!(app.notice(), Some("press esc again to interrupt"));
    let effects = app.on_key(&key(KeyCode::Esc), &[]);
    assert_eq!(
        effects,
        [Effect::Abort("ses_root".into())],
        "the whole tree from its root"
    );
}

#[test]
fn tab_switches_between_primary_agents_only_and_the_prompt_carries_the_choice() {
    let mut app = app();
    assert_eq!(app.agent_name(), Some("build"));
    app.on_key(&key(KeyCode::Tab), &[]);
    assert_eq!(app.agent_name(), Some("plan"));
    app.on_key(&key(KeyCode::Tab), &[]);
    assert_eq!(app.agent_name(), Some("build"), "explore is a subagent");
    app.on_key(&KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT), &[]);
    typed(&mut app, "hi");
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(
        effects,
        [Effect::Prompt {
            session: Some("ses_root".into()),
            text: "hi".into(),
            agent: Some("plan".into())
        }]
    );
    assert!(app.editor.is_empty());
}

#[test]
fn a_prompt_in_a_child_goes_to_the_childs_own_agent() {
    let mut app = app();
    app.open("ses_child".into());
    typed(&mut app, "more");
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(
        effects,
        [Effect::Prompt {
            session: Some("ses_child".into()),
            text: "more".into(),
            agent: None
        }]
    );
}

#[test]
fn slash_commands_complete_and_run_built_in_or_on_the_server() {
    let mut app = app();
    typed(&mut app, "/rev");
    let Overlay::Completion(c) = &app.overlay else {
        panic!("completion is open: {:?}", app.overlay);
    };
    assert_eq!(c.items[0].label, "/review");
    app.on_key(&key(KeyCode::Tab), &[]);
    assert_eq!(app.editor.text(), "/review ");
    typed(&mut app, "src");
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(
        effects,
        [Effect::Command {
            session: Some("ses_root".into()),
            name: "review".into(),
            arguments: "src".into(),
            agent: Some("build".into())
        }]
    );
    typed(&mut app, "/nope");
    app.on_key(&key(KeyCode::Esc), &[]);
    assert!(app.on_key(&key(KeyCode::Enter), &[]).is_empty());
    assert_eq!(app.notice(), Some("no command /nope"));
    typed(&mut app, "/new");
    app.on_key(&key(KeyCode::Esc), &[]);
    app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(app.current, None);
}

#[test]
fn at_mentions_complete_agents_and_files() {
    let mut app = app();
    let effects = typed(&mut app, "look @ex");
    assert!(effects.contains(&Effect::FindFiles("ex".into())));
    assert_eq!(app.completing_mention().as_deref(), Some("ex"));
    let Overlay::Completion(c) = &app.overlay else {
        panic!("completion is open");
    };
    assert_eq!(c.items[0].label, "@explore");
    let files = vec!["src/extra.rs".to_string(), "docs/readme.md".to_string()];
    app.refresh_completion(&files);
    let Overlay::Completion(c) = &app.overlay else {
        panic!("completion is open");
    };
    assert!(c.items.iter().any(|i| i.label == "@src/extra.rs"));
    assert!(
        !c.items.iter().any(|i| i.label == "@docs/readme.md"),
        "a file that does not match what is typed is left out"
    );
}

#[test]
fn an_ask_in_the_tree_takes_the_answer_keys() {
    let mut app = app();
    let request: taskforce_actors::permission::PermissionRequest = serde_json::from_value(json!({
        "id": "per_1", "sessionID": "ses_child", "permission": "bash", "patterns": ["rm x"],
        "metadata": {"command": "rm x"}, "always": ["rm *"], "rootSessionID": "ses_root", "path": ["build", "general"]
    }))
    .unwrap();
    app.apply(&Event::PermissionAsked(Box::new(request)));
    assert!(app.ask().is_some());
    let effects = app.on_key(&key(KeyCode::Char('a')), &[]);
    assert_eq!(
        effects,
        [Effect::Reply("per_1".into(), PermissionReply::Always)]
    );
    // Arrows pick an answer, Enter sends it.
    app.on_key(&key(KeyCode::Right), &[]);
    app.on_key(&key(KeyCode::Right), &[]);
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(
        effects,
        [Effect::Reply("per_1".into(), PermissionReply::Reject)]
    );
}

#[test]
fn ctrl_c_clears_a_written_prompt_and_quits_on_an_empty_one() {
    let mut app = app();
    typed(&mut app, "draft");
    app.on_key(&ctrl('c'), &[]);
    assert!(app.editor.is_empty());
    assert!(!app.quit);
    app.on_key(&ctrl('c'), &[]);
    assert!(app.quit);
}

#[test]
fn the_tree_panel_loads_the_sessions_it_has_not_seen_yet() {
    let mut app = app();
    app.on_key(&ctrl('x'), &[]);
    let effects = app.on_key(&key(KeyCode::Char('t')), &[]);
    assert_eq!(app.overlay, Overlay::Tree { selected: 0 });
    assert_eq!(effects, [Effect::Load("ses_child".into())]);
    app.on_key(&key(KeyCode::Down), &[]);
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(app.current.as_deref(), Some("ses_child"));
    assert_eq!(app.overlay, Overlay::None);
    assert_eq!(effects, [Effect::Load("ses_child".into())]);
}

fn ask_questions(app: &mut App) {
    let request: taskforce_actors::question::QuestionRequest = serde_json::from_value(json!({
        "id": "que_1", "sessionID": "ses_child", "rootSessionID": "ses_root", "path": ["build", "general"],
        "questions": [
            {"question": "Which color?", "header": "Color", "options": [
                {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]},
            {"question": "Which sizes?", "header": "Size", "multiple": true, "custom": false, "options": [
                {"label": "S", "description": "small"}, {"label": "M", "description": "medium"}, {"label": "L", "description": "large"}]}
        ]
    }))
    .unwrap();
    app.apply(&Event::QuestionAsked(Box::new(request)));
}

#[test]
fn a_question_in_the_tree_is_answered_question_by_question_with_choice_keys() {
    let mut app = app();
    ask_questions(&mut app);
    assert!(app.question().is_some());
    // The first takes one choice: the number picks it and the next question comes up.
    assert!(app.on_key(&key(KeyCode::Char('2')), &[]).is_empty());
    assert_eq!(app.answering().index, 1);
    // The second takes several: space and numbers toggle, Enter sends every answer.
    app.on_key(&key(KeyCode::Char(' ')), &[]);
    app.on_key(&key(KeyCode::Char('3')), &[]);
    app.on_key(&key(KeyCode::Char('1')), &[]);
    assert!(app.answering().picked.contains(&2));
    let effects = app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(
        effects,
        [Effect::AnswerQuestion(
            "que_1".into(),
            vec![vec!["Blue".into()], vec!["L".into()]]
        )]
    );
}

#[test]
fn a_question_takes_a_typed_answer_or_is_dismissed_with_esc() {
    let mut app = app();
    ask_questions(&mut app);
    // The row past the choices types an answer of one's own.
    app.on_key(&key(KeyCode::Down), &[]);
    app.on_key(&key(KeyCode::Down), &[]);
    app.on_key(&key(KeyCode::Enter), &[]);
    typed(&mut app, "green");
    assert_eq!(app.answering().typing.as_deref(), Some("green"));
    app.on_key(&key(KeyCode::Enter), &[]);
    assert_eq!(app.answering().answers, vec![vec!["green".to_string()]]);
    let effects = app.on_key(&key(KeyCode::Esc), &[]);
    assert_eq!(effects, [Effect::DismissQuestion("que_1".into())]);
    // Answered elsewhere: the panel goes.
    app.apply(&Event::QuestionRejected {
        session_id: "ses_child".parse().unwrap(),
        request_id: "que_1".parse().unwrap(),
    });
    assert!(app.question().is_none());
}

#[test]
fn a_remote_request_fills_and_sends_the_prompt_shows_a_toast_and_opens_a_session() {
    let mut app = app();
    assert!(
        app.apply(&Event::TuiPromptAppend {
            text: "fix the bug".into()
        })
        .is_empty()
    );
    assert_eq!(app.editor.text(), "fix the bug");
    let effects = app.apply(&Event::TuiCommandExecute {
        command: "prompt.submit".into(),
    });
    assert!(
        matches!(effects.as_slice(), [Effect::Prompt { text, .. }] if text == "fix the bug"),
        "{effects:?}"
    );
    app.apply(&Event::TuiToastShow {
        title: Some("CI".into()),
        message: "green".into(),
        variant: taskforce_actors::bus::ToastVariant::Success,
        duration: None,
    });
    assert_eq!(
        app.notice.as_ref().map(|(n, _)| n.as_str()),
        Some("CI: green")
    );
    let effects = app.apply(&Event::TuiSessionSelect {
        session_id: "ses_child".parse().unwrap(),
    });
    assert_eq!(app.current.as_deref(), Some("ses_child"));
    assert_eq!(effects, [Effect::Load("ses_child".into())]);
}
