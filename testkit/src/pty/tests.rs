//! The pseudo-terminal harness's own tests: screens, sizes, keys, and ending the program.

use super::*;

fn shell(script: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", script]);
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd
}

#[test]
fn the_screen_shows_what_the_program_writes_at_the_given_size() {
    let mut pty = Pty::spawn(&shell("stty size; read line; echo \"got $line\""), 80, 24);
    pty.wait_for_text("24 80");
    pty.type_text("hello");
    pty.key(Key::Enter);
    pty.wait_for_text("got hello");
    assert!(pty.ever_shown("hello"));
    assert!(!pty.ever_shown("goodbye"));
    let status = pty.wait_exit();
    assert!(status.success(), "{status:?}");
    pty.assert_restored();
}

#[test]
fn a_resize_reaches_the_program_and_the_screen() {
    let mut pty = Pty::spawn(&shell("read a; stty size; read b"), 80, 24);
    pty.resize(100, 30);
    pty.key(Key::Enter);
    pty.wait_for_text("30 100");
    assert_eq!(pty.with_screen(|s| s.size()), (non_zero(30), non_zero(100)));
    pty.key(Key::Enter);
    assert!(pty.wait_exit().success());
}

#[test]
#[should_panic(expected = "the program left the alternate screen on")]
fn a_program_that_stays_on_the_alternate_screen_is_caught() {
    let pty = Pty::spawn(&shell("printf '\\033[?1049hdrawn'"), 80, 24);
    pty.wait_exit();
    pty.assert_restored();
}

#[test]
#[should_panic(expected = "left the terminal in raw mode")]
fn a_program_that_leaves_raw_mode_on_is_caught() {
    let pty = Pty::spawn(&shell("stty raw -echo"), 80, 24);
    pty.wait_exit();
    pty.assert_restored();
}

#[test]
#[should_panic(expected = "waiting until the screen shows \"never\": the program ended")]
fn a_wait_that_cannot_succeed_fails_with_the_screen() {
    let pty = Pty::spawn(&shell("echo something else"), 80, 24);
    pty.wait_for_text("never");
}

#[test]
fn a_program_that_ignores_the_hangup_is_killed_when_the_terminal_is_dropped() {
    let pty = Pty::spawn(&shell("trap '' HUP; echo ready; read line"), 80, 24);
    pty.wait_for_text("ready");
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(pty);
        let _ = done.send(());
    });
    dropped
        .recv_timeout(crate::PATIENCE)
        .unwrap_or_else(|_| panic!("dropping the terminal did not end the program"));
}

#[test]
fn keys_are_the_bytes_a_terminal_sends() {
    assert_eq!(Key::Ctrl('x').bytes(), vec![0x18]);
    assert_eq!(Key::Ctrl('C').bytes(), vec![0x03]);
    assert_eq!(Key::Right.bytes(), b"\x1b[C");
    assert_eq!(Key::Char('é').bytes(), "é".as_bytes());
}
