//! OpenCode's own clients drive `taskforce serve`: the `opencode` CLI of the npm package
//! `opencode-ai` (pinned in `tests/opencode/package.json`, installed with `npm ci` when missing)
//! runs its terminal UI (`opencode attach URL`, in a pseudo-terminal) and its one-shot
//! `opencode run --attach URL` against a server on a sandbox project with a scripted model.
//!
//! OpenCode runs with a home and XDG folders of its own inside the sandbox and needs no
//! network: its fetch of the models.dev catalogue and its update check are switched off.

mod reads;
mod run;
mod tui;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::json;

use super::support::Sandbox;

/// The folder of the Node package that pins OpenCode's CLI.
fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opencode")
}

/// OpenCode's native program, installed once per test run by `npm ci` when missing.
fn opencode_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let dir = package_dir();
        let modules = dir.join("node_modules");
        if !modules.join("opencode-ai/package.json").exists() {
            let status = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&dir)
                .status()
                .unwrap_or_else(|e| {
                    panic!("the OpenCode client tests need node and npm (npm ci in tests/opencode): {e}")
                });
            assert!(status.success(), "npm ci in tests/opencode failed");
        }
        native_program(&modules).unwrap_or_else(|| {
            panic!(
                "no OpenCode program for this platform below {}",
                modules.display()
            )
        })
    })
}

/// The program that `opencode-ai`'s launcher script (`bin/opencode`, a Node script) would
/// start: the platform package `opencode-<os>-<arch>[-baseline][-musl]` holds it, the baseline
/// build first on x64 processors without AVX2. Running it directly leaves no Node process
/// between the terminal and OpenCode.
fn native_program(modules: &Path) -> Option<PathBuf> {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let base = format!("opencode-{os}-{arch}");
    let avx2 = std::fs::read_to_string("/proc/cpuinfo")
        .is_ok_and(|info| info.split_whitespace().any(|flag| flag == "avx2"));
    let (first, second) = if arch == "x64" && !avx2 {
        (format!("{base}-baseline"), base.clone())
    } else {
        (base.clone(), format!("{base}-baseline"))
    };
    let names = [
        first,
        second,
        format!("{base}-musl"),
        format!("{base}-baseline-musl"),
    ];
    names
        .iter()
        .map(|name| modules.join(name).join("bin/opencode"))
        .find(|path| path.is_file())
}

/// `opencode` with `args`, in `s`'s project, with only the environment it needs: its own home
/// and XDG folders below the sandbox's home, a 256-colour terminal, and no network.
fn opencode(s: &Sandbox, args: &[&str]) -> Command {
    let home = s.home.join("opencode");
    let mut cmd = Command::new(opencode_program());
    cmd.args(args)
        .current_dir(&s.project)
        .env_clear()
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("TMPDIR", s.home.join("tmp"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TERM", "xterm-256color")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1");
    cmd
}

/// The answer to a prompt containing "hello".
const HELLO: &str = "Hello from the taskforce build agent.";

/// A project whose `build` agent answers "hello"; delegates "count" to a `general` child that
/// runs `ls`; runs `ls` itself for "list the files"; answers "slow" only after a minute;
/// rewrites `notes.txt` with the write tool when asked to "rewrite"; and answers a prompt
/// carrying the word written in `notes.txt` ("zanzibar") by naming it. Every `bash` call asks
/// first. Other prompts get "No rule for <agent>.".
fn project() -> Sandbox {
    let s = Sandbox::new();
    let task = json!({"name": "task", "input": {
        "description": "count the files",
        "prompt": "count the files here",
        "subagent_type": "general"
    }});
    let write = json!({"name": "write", "input": {
        "filePath": "notes.txt",
        "content": "rewritten by the model\n"
    }});
    let script = json!({"rules": [
        {"when": {"agent": "title"}, "reply": {"text": "A session title"}},
        {"when": {"agent": "build", "last_role": "user", "contains": "zanzibar"},
         "reply": {"text": "The notes name the island of Zanzibar."}},
        {"when": {"agent": "build", "last_role": "user", "contains": "hello"},
         "reply": {"text": HELLO}},
        {"when": {"agent": "build", "last_role": "user", "contains": "count"},
         "reply": {"text": "Asking a helper.", "tool_calls": [task]}},
        {"when": {"agent": "build", "last_role": "tool", "contains": "There are some files."},
         "reply": {"text": "The helper counted the files."}},
        {"when": {"agent": "build", "last_role": "user", "contains": "list the files"},
         "reply": {"tool_calls": [{"name": "bash", "input": {"command": "ls", "description": "list the files here"}}]}},
        {"when": {"agent": "build", "last_role": "tool", "contains": "taskforce.toml"},
         "reply": {"text": "The files are listed."}},
        {"when": {"agent": "build", "last_role": "user", "contains": "rewrite"},
         "reply": {"tool_calls": [write]}},
        {"when": {"agent": "build", "last_role": "tool", "contains": "Wrote file successfully."},
         "reply": {"text": "The notes are rewritten."}},
        {"when": {"agent": "build", "last_role": "user", "contains": "slow"},
         "reply": {"text": "this answer comes too late"}, "delay_ms": 60_000},
        {"when": {"agent": "general", "last_role": "user"},
         "reply": {"tool_calls": [{"name": "bash", "input": {"command": "ls", "description": "list the files"}}]}},
        {"when": {"agent": "general", "last_role": "tool"},
         "reply": {"text": "There are some files."}}
    ], "fallback": {"text": "No rule for {{agent}}."}});
    let path = s.file("script.json", &script.to_string());
    s.file("notes.txt", "the secret word is zanzibar\n");
    s.file(
        "taskforce.toml",
        &format!(
            "model = \"scripted/tui\"\nsmall_model = \"scripted/echo\"\n\n[provider.scripted]\nscript = {:?}\n\n[permission]\nbash = \"ask\"\n",
            path.display().to_string()
        ),
    );
    std::fs::create_dir_all(s.home.join("tmp")).unwrap();
    s
}

/// A running `taskforce serve` on a sandbox project, stopped when dropped; its log goes to a
/// file that [`Serve::log`] reads, for failure messages.
struct Serve {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Serve {
    fn start(s: &Sandbox) -> Serve {
        let log = s.home.join("serve.log");
        let mut child = s
            .command(&["serve", "--port", "0"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("taskforce server listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from taskforce serve: {line:?}"))
            .to_string();
        Serve { child, url, log }
    }

    /// What the server has logged so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
