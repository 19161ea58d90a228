//! OpenCode's terminal UI (`opencode attach URL`) as a person uses it against `taskforce
//! serve`: keys are typed into a pseudo-terminal and the screen is read.

use taskforce_testkit::pty::{Key, Pty, Screen};

use super::{HELLO, Serve, opencode, project};
use crate::suite::support::Sandbox;

/// OpenCode's TUI attached to a `taskforce serve` on a new [`project`]. Its fields drop in
/// order: the TUI, the server, then the sandbox.
struct Attached {
    pty: Pty,
    _serve: Serve,
    s: Sandbox,
}

/// OpenCode's TUI attached to a new server, in a terminal 100 × 30, once it shows its prompt.
fn attach() -> Attached {
    let s = project();
    let serve = Serve::start(&s);
    let pty = Pty::spawn(&opencode(&s, &["attach", &serve.url]), 100, 30);
    pty.wait_for_text("Ask anything");
    Attached {
        pty,
        _serve: serve,
        s,
    }
}

/// Types `text`, waits for the prompt to show it, then presses Enter (apart from the text, so
/// that OpenCode does not take the whole as a paste).
fn prompt(pty: &mut Pty, text: &str) {
    pty.type_text(text);
    pty.wait_for_text(text);
    pty.key(Key::Enter);
}

/// The session runs: the footer offers to interrupt it.
fn busy(screen: &Screen) -> bool {
    let text = screen.contents();
    text.contains("esc interrupt") || text.contains("esc again to interrupt")
}

/// Nothing runs: the footer no longer offers to interrupt.
fn idle(screen: &Screen) -> bool {
    !busy(screen)
}

/// Presses OpenCode's leader key (ctrl+x), then `key`.
fn leader(pty: &mut Pty, key: Key) {
    pty.key(Key::Ctrl('x'));
    pty.key(key);
}

/// The first row of the screen showing `text`.
fn row_of(screen: &Screen, text: &str) -> Option<usize> {
    screen
        .contents()
        .lines()
        .position(|line| line.contains(text))
}

/// OpenCode's permission prompt, with its choices, shows `detail`.
fn asks(screen: &Screen, detail: &str) -> bool {
    let text = screen.contents();
    text.contains("Permission required") && text.contains("Allow once") && text.contains(detail)
}

/// Quits OpenCode (ctrl+c on an empty prompt) and checks that it ended well.
fn quit(pty: &mut Pty) {
    pty.key(Key::Ctrl('c'));
    let status = pty.wait_exit();
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_tui_shows_its_prompt_and_a_reply_below_the_typed_prompt() {
    let mut a = attach();
    let pty = &mut a.pty;
    prompt(pty, "hello there");
    pty.wait_for_text(HELLO);
    pty.wait_for("the turn ends", idle);
    pty.with_screen(|screen| {
        let asked = row_of(screen, "hello there");
        let answered = row_of(screen, HELLO);
        assert!(
            asked.is_some() && answered > asked,
            "the reply is not below the prompt:\n{}",
            screen.contents()
        );
    });
    quit(pty);
}

/// Says hello and waits for the answer and the turn's end. OpenCode reads a session's messages
/// once, when it first shows the session, and puts what that read answers in place of what the
/// events drew; taskforce's read can lag the events (a running call, or the text of a step not
/// yet ended, is missing from it for a while), so the scenarios below let OpenCode read their
/// session before the turn they look at.
fn say_hello(pty: &mut Pty) {
    prompt(pty, "hello there");
    pty.wait_for_text(HELLO);
    pty.wait_for("the turn ends", idle);
}

#[test]
fn a_task_child_is_entered_with_ctrl_x_right_and_left_with_ctrl_x_up() {
    let mut a = attach();
    let pty = &mut a.pty;
    say_hello(pty);
    prompt(pty, "count them");
    pty.wait_for_text("General Task");
    pty.wait_for_text("count the files");
    // The child's `ls` asks first; allowed once, the child and then the parent finish.
    pty.wait_for("the child's ask shows in the parent", |s| asks(s, "$ ls"));
    pty.key(Key::Enter);
    pty.wait_for_text("The helper counted the files.");
    pty.wait_for("the turn ends", idle);

    leader(pty, Key::Right);
    pty.wait_for("the child session shows its messages", |s| {
        let text = s.contents();
        text.contains("Subagent session")
            && text.contains("count the files here")
            && text.contains("There are some files.")
    });
    leader(pty, Key::Up);
    pty.wait_for("the parent session shows again", |s| {
        let text = s.contents();
        !text.contains("Subagent session")
            && text.contains("General Task")
            && text.contains("The helper counted the files.")
    });
    quit(pty);
}

#[test]
fn a_permission_ask_is_answered_allow_once_from_the_tui_and_the_turn_completes() {
    let mut a = attach();
    let pty = &mut a.pty;
    say_hello(pty);
    prompt(pty, "list the files");
    pty.wait_for("the ask shows with its command", |s| {
        asks(s, "$ ls") && s.contents().contains("list the files here")
    });
    // "Allow once" is the choice selected first: Enter confirms it.
    pty.key(Key::Enter);
    pty.wait_for_text("The files are listed.");
    pty.wait_for("the turn ends", idle);
    pty.wait_for("the ask is gone", |s| {
        !s.contents().contains("Permission required")
    });
    quit(pty);
}

#[test]
fn esc_twice_interrupts_a_running_turn_before_its_answer() {
    let mut a = attach();
    let pty = &mut a.pty;
    prompt(pty, "a slow one");
    pty.wait_for("the turn runs", busy);
    pty.key(Key::Esc);
    pty.wait_for_text("esc again to interrupt");
    pty.key(Key::Esc);
    pty.wait_for("the session goes idle", idle);
    pty.wait_for_text("interrupted");
    assert!(
        !pty.ever_shown("this answer comes too late"),
        "{}",
        pty.screen()
    );
    quit(pty);
}

#[test]
fn undo_in_the_tui_gives_a_rewritten_file_its_old_content_back() {
    let mut a = attach();
    let pty = &mut a.pty;
    let notes = a.s.project.join("notes.txt");
    let before = std::fs::read_to_string(&notes).unwrap();
    prompt(pty, "rewrite the notes");
    pty.wait_for_text("The notes are rewritten.");
    pty.wait_for("the turn ends", idle);
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "rewritten by the model\n"
    );

    // `/undo` reverts the session to before its last user message (OpenCode calls
    // POST /session/:id/revert with that message's id) and puts the prompt back in the editor.
    pty.type_text("/undo");
    pty.wait_for_text("Undo previous message");
    pty.key(Key::Enter);
    pty.wait_for_text("1 message reverted");
    pty.wait_for("the reverted exchange is hidden", |s| {
        !s.contents().contains("The notes are rewritten.")
    });
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), before);
    // The undone prompt is back in the editor; ctrl+c clears it before the next one quits.
    pty.wait_for_text("rewrite the notes");
    pty.key(Key::Ctrl('c'));
    pty.wait_for("the editor is cleared", |s| {
        !s.contents().contains("rewrite the notes")
    });
    quit(pty);
}
