//! The terminal UI as a person uses it: `taskforce` runs in a pseudo-terminal on a sandbox
//! project with a scripted model, keys are typed and the screen is read.

use std::io::BufRead;
use std::process::Stdio;

use serde_json::json;
use taskforce_testkit::pty::{Cell, Color, Key, Pty, Screen};

use super::support::Sandbox;

/// The first line of the answer to "hello"; a code block follows (highlighted, so coloured
/// unless `NO_COLOR` is set).
const HELLO: &str = "Hello from the build agent.";

/// A project whose `build` agent answers "hello", delegates "count" to a `general` child that
/// runs `ls` (asking first) and answers, and takes a minute to start answering "slow"; other
/// agents get "No rule for <agent>.".
fn project() -> Sandbox {
    let s = Sandbox::new();
    let task = json!({"name": "task", "input": {
        "description": "count the files",
        "prompt": "count the files here",
        "subagent_type": "general"
    }});
    let script = json!({"rules": [
        {"when": {"agent": "title"}, "reply": {"text": "A session title"}},
        {"when": {"agent": "build", "last_role": "user", "contains": "hello"},
         "reply": {"text": format!("{HELLO}\n\n```rust\nfn main() {{ println!(\"hi\"); }}\n```\n")}},
        {"when": {"agent": "build", "last_role": "user", "contains": "count"},
         "reply": {"text": "Asking a helper.", "tool_calls": [task]}},
        {"when": {"agent": "build", "last_role": "user", "contains": "colors"},
         "reply": {"tool_calls": [{"name": "question", "input": {"questions": [{
             "question": "Which color?", "header": "Color",
             "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]}]}}]}},
        {"when": {"agent": "build", "last_role": "tool", "contains": "User has answered"},
         "reply": {"text": "Heard: {{last}}"}},
        {"when": {"agent": "build", "last_role": "tool"},
         "reply": {"text": "The helper counted the files."}},
        {"when": {"agent": "build", "last_role": "user", "contains": "slow"},
         "reply": {"text": "this answer comes too late"}, "delay_ms": 60_000},
        {"when": {"agent": "general", "last_role": "user"},
         "reply": {"tool_calls": [{"name": "bash", "input": {"command": "ls", "description": "list the files"}}]}},
        {"when": {"agent": "general", "last_role": "tool"},
         "reply": {"text": "There are some files."}}
    ], "fallback": {"text": "No rule for {{agent}}."}});
    let path = s.file("script.json", &script.to_string());
    s.file(
        "taskforce.toml",
        &format!(
            "model = \"scripted/tui\"\nsmall_model = \"scripted/echo\"\n\n[provider.scripted]\nscript = {:?}\n\n[agent.general.permission]\nbash = \"ask\"\n",
            path.display().to_string()
        ),
    );
    s
}

/// `taskforce` with `args` (none: the TUI on `s`'s project) in a terminal `cols` × `rows`,
/// once it shows the editor.
fn open(s: &Sandbox, args: &[&str], cols: u16, rows: u16, env: &[(&str, &str)]) -> Pty {
    let mut command = s.command(args);
    command.env("TERM", "xterm-256color").env("TMPDIR", &s.home);
    for (key, value) in env {
        command.env(key, value);
    }
    let pty = Pty::spawn(&command, cols, rows);
    pty.wait_for_text("ask anything");
    pty
}

/// Types `text` and Enter.
fn prompt(pty: &mut Pty, text: &str) {
    pty.type_text(text);
    pty.wait_for_text(text);
    pty.key(Key::Enter);
}

/// Says hello and waits for the whole answer, its code block included, and the run's end.
fn say_hello(pty: &mut Pty) {
    prompt(pty, "hello there");
    pty.wait_for_text(HELLO);
    pty.wait_for_text("println!");
    pty.wait_for("the run ends", idle);
}

/// Presses the leader (ctrl+x), waits for the footer to show it, then `key`.
fn leader(pty: &mut Pty, key: Key) {
    pty.key(Key::Ctrl('x'));
    pty.wait_for_text("ctrl+x …");
    pty.key(key);
}

/// Opens a panel with the leader and `key`, waits for its `title` and a row showing `row`,
/// and closes it with Esc.
fn panel(pty: &mut Pty, key: char, title: &str, row: &str) {
    leader(pty, Key::Char(key));
    pty.wait_for(&format!("the {title:?} panel shows {row:?}"), |s| {
        let text = s.contents();
        text.contains(title) && text.contains(row)
    });
    pty.key(Key::Esc);
    pty.wait_for(&format!("the {title:?} panel closes"), |s| {
        !s.contents().contains(title)
    });
}

/// The screen's first row: where the open session is in its tree.
fn header(screen: &Screen) -> String {
    screen.contents().lines().next().unwrap_or("").to_string()
}

/// Nothing in the tree runs: the spinner line is gone.
fn idle(screen: &Screen) -> bool {
    !screen.contents().contains("working")
}

/// What the footer shows when a request to the server failed.
const FAILURES: [&str; 3] = ["/session/", "cannot reach", "unexpected answer"];

/// Quits with ctrl+c on an empty editor and checks the terminal was given back, and that no
/// request to the server failed on the way.
fn quit(mut pty: Pty) {
    for failure in FAILURES {
        assert!(
            !pty.ever_shown(failure),
            "the screen showed a failure ({failure:?})"
        );
    }
    pty.key(Key::Ctrl('c'));
    let status = pty.wait_exit();
    assert!(status.success(), "{status:?}");
    pty.assert_restored();
    let output = pty.output();
    assert!(
        output.windows(8).any(|w| w == b"\x1b[?1049h"),
        "the TUI drew on the alternate screen"
    );
}

/// Whether a cell of the screen passes `test`.
fn any_cell(screen: &Screen, mut test: impl FnMut(&Cell) -> bool) -> bool {
    let (rows, cols) = screen.size();
    (0..rows.get()).any(|r| (0..cols.get()).any(|c| screen.cell(r, c).is_some_and(&mut test)))
}

#[test]
fn a_prompt_streams_its_answer_and_a_child_is_opened_asked_for_and_left() {
    let s = project();
    let mut pty = open(&s, &[], 80, 24, &[]);
    pty.wait_for("the header names a new session", |s| {
        header(s).contains("new session")
    });

    say_hello(&mut pty);
    pty.wait_for("the header names the build agent", |s| {
        header(s).starts_with("build")
    });
    assert!(
        pty.with_screen(|s| any_cell(s, |c| c.fgcolor() != Color::Default)),
        "the screen has colours:\n{}",
        pty.screen()
    );

    prompt(&mut pty, "count them");
    pty.wait_for_text("task · general");
    pty.wait_for_text("count the files");
    // The child's `ls` waits for an answer: the tree is busy until it gets one.
    pty.wait_for("the ask panel shows", |s| {
        let text = s.contents();
        text.contains("permission") && text.contains("bash ls") && text.contains("[o] once")
    });
    pty.wait_for_text("asked by build › general");
    // The turn is still running, and what it said so far is on screen.
    pty.wait_for("the turn's text shows while it runs", |s| {
        let text = s.contents();
        text.contains("Asking a helper.") && text.contains("working")
    });

    panel(
        &mut pty,
        't',
        "session tree",
        "general $0.0000 running bash",
    );
    panel(&mut pty, 'l', "sessions (", "A session title");

    leader(&mut pty, Key::Right);
    pty.wait_for("the header shows the child", |s| {
        header(s).starts_with("build › general")
    });
    leader(&mut pty, Key::Up);
    pty.wait_for("the header shows the root again", |s| {
        let h = header(s);
        h.starts_with("build") && !h.contains('›')
    });
    pty.wait_for_text("task · general");

    pty.key(Key::Char('o'));
    pty.wait_for_text("The helper counted the files.");
    pty.wait_for("the tree is idle", idle);
    pty.wait_for("the ask panel is gone", |s| {
        !s.contents().contains("[o] once")
    });
    pty.wait_for("the card says the child is done", |s| {
        s.contents()
            .lines()
            .any(|l| l.trim_end().trim_end_matches('│').trim() == "│ done")
    });

    // Enter on an empty editor opens the task card's child.
    pty.key(Key::Enter);
    pty.wait_for("the header shows the child", |s| {
        header(s).starts_with("build › general")
    });
    pty.wait_for_text("There are some files.");
    leader(&mut pty, Key::Up);
    pty.wait_for_text("The helper counted the files.");
    quit(pty);
}

#[test]
fn a_question_is_answered_from_its_panel() {
    let s = project();
    let mut pty = open(&s, &[], 100, 30, &[]);
    prompt(&mut pty, "pick colors");
    pty.wait_for_text("[Color] Which color?");
    pty.wait_for_text("asked by build");
    pty.wait_for_text("2. Blue — cool");
    pty.key(Key::Down);
    pty.key(Key::Enter);
    pty.wait_for_text("Heard: User has answered your questions");
    pty.wait_for("the panel gives the editor back", |screen| {
        !screen.contents().contains("[Color]")
    });
    quit(pty);
}

#[test]
fn esc_twice_interrupts_a_busy_tree() {
    let s = project();
    let mut pty = open(&s, &[], 80, 24, &[]);
    prompt(&mut pty, "a slow one");
    pty.wait_for_text("working");
    pty.key(Key::Esc);
    pty.wait_for_text("again to interrupt");
    pty.key(Key::Esc);
    pty.wait_for("the tree stops", idle);
    pty.wait_for_text("aborted");
    assert!(
        !pty.screen().contains("this answer comes too late"),
        "{}",
        pty.screen()
    );
    quit(pty);
}

#[test]
fn tab_switches_the_agent_and_ctrl_c_clears_a_draft_before_it_quits() {
    let s = project();
    let mut pty = open(&s, &[], 80, 24, &[]);
    pty.wait_for_text("┌ build ");
    pty.key(Key::Tab);
    pty.wait_for_text("┌ plan ");
    prompt(&mut pty, "hello");
    pty.wait_for_text("No rule for plan.");
    pty.key(Key::BackTab);
    pty.wait_for_text("┌ build ");

    pty.type_text("a draft");
    pty.wait_for_text("a draft");
    pty.key(Key::Ctrl('c'));
    pty.wait_for("the draft is cleared", |s| {
        let text = s.contents();
        !text.contains("a draft") && text.contains("ask anything")
    });
    quit(pty);
}

#[test]
fn a_resized_terminal_is_redrawn_at_its_new_size() {
    let s = project();
    let mut pty = open(&s, &[], 120, 40, &[]);
    say_hello(&mut pty);
    for (cols, rows) in [(90u16, 30u16), (140, 45)] {
        pty.resize(cols, rows);
        // The editor's box spans the new width just above the footer, on the last row.
        pty.wait_for(&format!("the screen is redrawn at {cols}x{rows}"), |s| {
            let corner = s
                .cell(rows - 2, cols - 1)
                .is_some_and(|c| c.contents() == "┘");
            let footer = s
                .contents()
                .lines()
                .nth(usize::from(rows - 1))
                .map(str::to_string);
            corner && footer.is_some_and(|f| f.contains("tree") && f.contains("build"))
        });
        pty.wait_for_text(HELLO);
    }
    quit(pty);
}

#[test]
fn no_color_draws_without_colours() {
    let s = project();
    let mut pty = open(&s, &[], 80, 24, &[("NO_COLOR", "1")]);
    say_hello(&mut pty);
    pty.with_screen(|screen| {
        assert!(
            !any_cell(screen, |c| c.fgcolor() != Color::Default
                || c.bgcolor() != Color::Default),
            "a cell is coloured:\n{}",
            screen.contents()
        );
    });
    quit(pty);
}

#[test]
fn attach_drives_a_running_server_that_has_a_password() {
    let s = project();
    let mut server = Serving(
        s.command(&["serve", "--port", "0"])
            .env("TASKFORCE_SERVER_PASSWORD", "hunter2")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("taskforce server listening on ")
        .unwrap_or_else(|| panic!("no address: {line:?}"))
        .to_string();
    let mut pty = open(
        &s,
        &["attach", &url],
        80,
        24,
        &[("TASKFORCE_SERVER_PASSWORD", "hunter2")],
    );
    say_hello(&mut pty);
    quit(pty);
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "the server outlives the TUI"
    );
}

/// A running `taskforce serve`, stopped when dropped.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
