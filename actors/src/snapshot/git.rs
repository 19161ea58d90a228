//! Running git on a snapshot store: its own git directory, the project's worktree.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Settings every call runs with: no line-ending rewrites, long paths and symlinks as they are,
/// paths printed unquoted.
const SETTINGS: [&str; 8] = [
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.longpaths=true",
    "-c",
    "core.symlinks=true",
    "-c",
    "core.quotepath=false",
];

/// Variables of the caller's environment that would point git elsewhere.
const REDIRECTS: [&str; 7] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
];

/// What a git call printed, and whether it succeeded.
pub(super) struct Output {
    pub ok: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    /// Standard output as text, trimmed.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_string()
    }

    /// Standard output split at NUL bytes (`-z` listings), without empty entries.
    pub fn entries(&self) -> Vec<String> {
        self.stdout
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }
}

/// A snapshot store's git directory and the worktree it records.
#[derive(Debug, Clone)]
pub(super) struct Git {
    pub dir: PathBuf,
    pub worktree: PathBuf,
}

impl Git {
    /// Runs `git` with `args` on the store and worktree.
    pub async fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = tokio::process::Command::new("git");
        command
            .args(SETTINGS)
            .arg("--git-dir")
            .arg(&self.dir)
            .arg("--work-tree")
            .arg(&self.worktree)
            .args(args)
            .current_dir(&self.worktree)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in REDIRECTS {
            command.env_remove(name);
        }
        let child = match command.spawn() {
            Ok(c) => c,
            Err(e) => return failed(format!("cannot run git: {e}")),
        };
        match child.wait_with_output().await {
            Ok(out) => Output {
                ok: out.status.success(),
                stdout: out.stdout,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            },
            Err(e) => failed(format!("git did not finish: {e}")),
        }
    }

    /// `path` relative to the worktree, with forward slashes, when it lies inside it.
    pub fn relative(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.worktree).ok()?;
        let text = rel.to_string_lossy().replace('\\', "/");
        (!text.is_empty()).then_some(text)
    }
}

/// A call that could not run.
fn failed(stderr: String) -> Output {
    Output {
        ok: false,
        stdout: Vec::new(),
        stderr,
    }
}
