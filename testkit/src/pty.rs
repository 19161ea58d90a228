//! Driving a program as a person at a terminal does: it runs in a pseudo-terminal of a given
//! size, what it writes goes through a terminal emulator (`vt100`), and the test types keys and
//! reads the screen.
//!
//! A reader thread feeds the program's output to the emulator and wakes every waiter; waiting
//! ([`Pty::wait_for`], [`Pty::wait_exit`]) is on that signal, with [`PATIENCE`](crate::PATIENCE)
//! only as the bound a broken program reaches. A failed wait panics with the screen in its
//! message.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portable_pty::{ChildKiller, CommandBuilder, MasterPty, PtySize, native_pty_system};

pub use portable_pty::ExitStatus;
pub use vt100::{Cell, Color, Screen};

use crate::PATIENCE;

/// A key as a terminal sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Return.
    Enter,
    /// Escape, alone.
    Esc,
    /// Tab.
    Tab,
    /// Shift+Tab.
    BackTab,
    /// Backspace.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Arrow right.
    Right,
    /// Arrow left.
    Left,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// A character.
    Char(char),
    /// Ctrl with a letter (`Ctrl('x')`).
    Ctrl(char),
}

impl Key {
    /// The bytes a terminal in its default (normal cursor key) mode sends for this key.
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Key::Enter => b"\r".to_vec(),
            Key::Esc => b"\x1b".to_vec(),
            Key::Tab => b"\t".to_vec(),
            Key::BackTab => b"\x1b[Z".to_vec(),
            Key::Backspace => b"\x7f".to_vec(),
            Key::Up => b"\x1b[A".to_vec(),
            Key::Down => b"\x1b[B".to_vec(),
            Key::Right => b"\x1b[C".to_vec(),
            Key::Left => b"\x1b[D".to_vec(),
            Key::PageUp => b"\x1b[5~".to_vec(),
            Key::PageDown => b"\x1b[6~".to_vec(),
            Key::Char(c) => c.to_string().into_bytes(),
            Key::Ctrl(c) => vec![(c.to_ascii_lowercase() as u8) & 0x1f],
        }
    }
}

/// What the reader and waiter threads share with the test.
struct State {
    parser: vt100::Parser,
    /// Everything the program wrote, as written.
    output: Vec<u8>,
    /// The program's side of the terminal is closed (no more output will come).
    closed: bool,
    /// How the program ended, once it has.
    exit: Option<ExitStatus>,
    /// Every row text the screen has shown, each once.
    seen: HashSet<String>,
}

impl State {
    fn take(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
        self.output.extend_from_slice(bytes);
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        for row in screen.rows(0, cols.get()) {
            if !self.seen.contains(&row) {
                self.seen.insert(row);
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }
}

/// A program running in a pseudo-terminal, with the screen a terminal would show.
pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    killer: Box<dyn ChildKiller + Send + Sync>,
    /// The program's process id, to kill it when a hangup does not end it.
    pid: Option<u32>,
    shared: Arc<Shared>,
    /// The thread waiting for the program to end.
    waiting: Option<JoinHandle<()>>,
}

fn size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

fn non_zero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

impl Pty {
    /// Starts `command` (its program, arguments, working directory and the variables it sets;
    /// nothing else of this process's environment) in a terminal `cols` wide and `rows` high.
    pub fn spawn(command: &std::process::Command, cols: u16, rows: u16) -> Pty {
        let pair = native_pty_system()
            .openpty(size(cols, rows))
            .unwrap_or_else(|e| panic!("opening a pseudo-terminal: {e}"));
        let mut builder = CommandBuilder::new(command.get_program());
        builder.args(command.get_args());
        builder.env_clear();
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => builder.env(key, value),
                None => builder.env_remove(key),
            }
        }
        if let Some(dir) = command.get_current_dir() {
            builder.cwd(dir);
        }
        let mut child = pair
            .slave
            .spawn_command(builder)
            .unwrap_or_else(|e| panic!("starting {:?} in a terminal: {e}", command.get_program()));
        // Only the program holds the terminal's other side now: its output ends when it does.
        drop(pair.slave);
        let master = pair.master;
        let mut reader = master
            .try_clone_reader()
            .unwrap_or_else(|e| panic!("reading the terminal: {e}"));
        let writer = master
            .take_writer()
            .unwrap_or_else(|e| panic!("writing to the terminal: {e}"));
        let killer = child.clone_killer();
        let pid = child.process_id();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                parser: vt100::Parser::new(non_zero(rows), non_zero(cols), 0),
                output: Vec::new(),
                closed: false,
                exit: None,
                seen: HashSet::new(),
            }),
            changed: Condvar::new(),
        });
        let read_into = Arc::clone(&shared);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read_into.update(|s| s.take(&buf[..n])),
                }
            }
            read_into.update(|s| s.closed = true);
        });
        let wait_into = Arc::clone(&shared);
        let waiting = std::thread::spawn(move || {
            let status = child
                .wait()
                .unwrap_or_else(|e| ExitStatus::with_signal(&format!("not waited for: {e}")));
            wait_into.update(|s| s.exit = Some(status));
        });
        Pty {
            master,
            writer,
            killer,
            pid,
            shared,
            waiting: Some(waiting),
        }
    }

    /// Types `bytes` as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer
            .write_all(bytes)
            .and_then(|()| self.writer.flush())
            .unwrap_or_else(|e| panic!("typing into the terminal: {e}"));
    }

    /// Types `text`, character by character as a keyboard sends it.
    pub fn type_text(&mut self, text: &str) {
        self.send(text.as_bytes());
    }

    /// Presses `key`.
    pub fn key(&mut self, key: Key) {
        self.send(&key.bytes());
    }

    /// The screen's text now, rows separated by newlines.
    pub fn screen(&self) -> String {
        self.shared.lock().parser.screen().contents()
    }

    /// Answers `look` at the screen as it is now.
    pub fn with_screen<T>(&self, look: impl FnOnce(&Screen) -> T) -> T {
        look(self.shared.lock().parser.screen())
    }

    /// Waits until `ready` holds for the screen; panics naming `what`, with the screen, when
    /// it has not within [`PATIENCE`] or the program ended first.
    #[track_caller]
    pub fn wait_for(&self, what: &str, ready: impl FnMut(&Screen) -> bool) {
        self.wait_for_within(what, PATIENCE, ready);
    }

    /// Waits until the screen shows `text`; panics as [`Pty::wait_for`] does.
    #[track_caller]
    pub fn wait_for_text(&self, text: &str) {
        self.wait_for(&format!("the screen shows {text:?}"), |s| {
            s.contents().contains(text)
        });
    }

    /// [`Pty::wait_for`] with a bound of `patience`.
    #[track_caller]
    pub fn wait_for_within(
        &self,
        what: &str,
        patience: Duration,
        mut ready: impl FnMut(&Screen) -> bool,
    ) {
        self.until(&format!("waiting until {what}"), patience, |state| {
            if ready(state.parser.screen()) {
                Ok(Some(()))
            } else if state.closed {
                Err(format!("the program ended ({:?})", state.exit))
            } else {
                Ok(None)
            }
        });
    }

    /// Waits until `check` answers a value, looking again on every change; panics naming
    /// `what`, with the screen, when `check` fails or has answered nothing within `patience`.
    #[track_caller]
    fn until<T>(
        &self,
        what: &str,
        patience: Duration,
        check: impl FnMut(&State) -> Result<Option<T>, String>,
    ) -> T {
        match self.watch(patience, check) {
            Ok(value) => value,
            Err((why, screen)) => panic!("{what}: {why}; the screen:\n{}", frame(&screen)),
        }
    }

    /// Waits until `check` answers a value, looking again on every change; answers why not
    /// and the screen when `check` fails or has answered nothing within `patience`.
    fn watch<T>(
        &self,
        patience: Duration,
        mut check: impl FnMut(&State) -> Result<Option<T>, String>,
    ) -> Result<T, (String, String)> {
        let deadline = Instant::now() + patience;
        let mut state = self.shared.lock();
        loop {
            let now = Instant::now();
            let why = match check(&state) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) if now < deadline => None,
                Ok(None) => Some(format!("not within {patience:?}")),
                Err(why) => Some(why),
            };
            if let Some(why) = why {
                return Err((why, state.parser.screen().contents()));
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Resizes the terminal to `cols` × `rows`, as a window resize does (the program gets
    /// `SIGWINCH`).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        // The emulator first, so that what the program draws for the new size lands on it.
        self.shared.update(|s| {
            s.parser
                .screen_mut()
                .set_size(non_zero(rows), non_zero(cols))
        });
        self.master
            .resize(size(cols, rows))
            .unwrap_or_else(|e| panic!("resizing the terminal: {e}"));
    }

    /// Waits until the program has ended and all it wrote is on the screen; answers how it
    /// ended. Panics, with the screen, when it has not ended within [`PATIENCE`].
    #[track_caller]
    pub fn wait_exit(&self) -> ExitStatus {
        self.until("waiting for the program to end", PATIENCE, |state| {
            Ok(state.exit.clone().filter(|_| state.closed))
        })
    }

    /// Whether any row of the screen has shown `text` at any time so far (also what was on
    /// screen too briefly for a wait to see it).
    pub fn ever_shown(&self, text: &str) -> bool {
        self.shared.lock().seen.iter().any(|row| row.contains(text))
    }

    /// Everything the program wrote to the terminal, as written.
    pub fn output(&self) -> Vec<u8> {
        self.shared.lock().output.clone()
    }

    /// Checks that the program, once ended, left the terminal as it found it: the main screen
    /// shown (an alternate screen it entered was left after), the cursor visible, bracketed paste off, and
    /// (on Unix) the line discipline back in canonical mode with echo (raw mode off).
    #[track_caller]
    pub fn assert_restored(&self) {
        let state = self.shared.lock();
        let screen = state.parser.screen();
        let shown = screen.contents();
        assert!(
            !screen.alternate_screen(),
            "the program left the alternate screen on; the screen:\n{}",
            frame(&shown)
        );
        assert!(
            !screen.hide_cursor(),
            "the program left the cursor hidden; the screen:\n{}",
            frame(&shown)
        );
        assert!(
            !screen.bracketed_paste(),
            "the program left bracketed paste on"
        );
        let output = &state.output;
        if let Some(entered) = rfind(output, b"\x1b[?1049h") {
            assert!(
                rfind(output, b"\x1b[?1049l").is_some_and(|left| left > entered),
                "the program did not leave the alternate screen it entered: {:?}",
                String::from_utf8_lossy(&output[output.len().saturating_sub(200)..])
            );
        }
        drop(state);
        #[cfg(unix)]
        {
            use nix::sys::termios::LocalFlags;
            let termios = self
                .master
                .get_termios()
                .unwrap_or_else(|| panic!("the terminal's modes cannot be read"));
            let cooked = LocalFlags::ICANON | LocalFlags::ECHO;
            assert!(
                termios.local_flags.contains(cooked),
                "the program left the terminal in raw mode (local flags {:?})",
                termios.local_flags
            );
        }
    }
}

/// How long a program may take to end after the hangup [`Pty`]'s drop sends before it is killed.
const HANGUP_GRACE: Duration = Duration::from_secs(5);

impl Drop for Pty {
    fn drop(&mut self) {
        if self.shared.lock().exit.is_none() {
            // A hangup, as a closing terminal sends (portable-pty's killer sends SIGHUP).
            let _ = self.killer.kill();
            if !self.ended_within(HANGUP_GRACE) {
                self.kill_for_good();
            }
        }
        // The reader ends by itself once no process holds the program's side any more.
        if let Some(waiting) = self.waiting.take() {
            let _ = waiting.join();
        }
    }
}

impl Pty {
    /// Waits up to `patience` for the program to end; answers whether it has.
    fn ended_within(&self, patience: Duration) -> bool {
        self.watch(patience, |state| Ok(state.exit.as_ref().map(|_| ())))
            .is_ok()
    }

    /// Kills the program with SIGKILL (one that ignores the hangup would otherwise keep the
    /// drop waiting for it forever).
    fn kill_for_good(&self) {
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|pid| i32::try_from(pid).ok()) {
            use nix::sys::signal::{Signal, kill};
            let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

/// The screen's text in a frame, so that its edges show in a panic message.
fn frame(screen: &str) -> String {
    let mut out = String::from("┌────\n");
    for line in screen.lines() {
        out.push('│');
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("└────");
    out
}

#[cfg(all(test, unix))]
mod tests;
