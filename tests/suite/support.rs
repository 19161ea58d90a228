//! Running the binary in a throwaway home and project, with a clean environment.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Sandbox {
    dirs: taskforce_testkit::Sandbox,
    pub home: PathBuf,
    pub project: PathBuf,
    env: Vec<(String, String)>,
}

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dirs = taskforce_testkit::Sandbox::new();
        Sandbox {
            home: dirs.home.clone(),
            project: dirs.project.clone(),
            env: Vec::new(),
            dirs,
        }
    }

    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        self.dirs.file(rel, text)
    }

    pub fn home_file(&self, rel: &str, text: &str) -> PathBuf {
        self.dirs.home_file(rel, text)
    }

    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The binary with `args`, in the project, with the sandbox's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_taskforce"));
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().unwrap();
        Output {
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs a command that must fail with exit status 2; returns its stderr.
    pub fn usage_error(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status, 2,
            "stdout: {}\nstderr: {}",
            out.stdout, out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        assert!(!out.stderr.contains("RUST_BACKTRACE"), "{}", out.stderr);
        out.stderr
    }

    /// Runs a command that must succeed; returns it.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert_eq!(out.status, 0, "stderr: {}", out.stderr);
        out
    }
}

/// Sends SIGINT (Ctrl-C) to a running `child` and waits for it to end.
pub async fn interrupt(child: std::process::Child) -> std::process::Output {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

/// Starts `taskforce serve --port 0` in `s`'s project; answers the process and its base URL
/// (`http://127.0.0.1:PORT`), read from the line it prints once it listens.
pub async fn spawn_serve(s: &Sandbox) -> (Child, String) {
    spawn_serve_with(s, &[]).await
}

/// [`spawn_serve`] with more arguments after `serve --port 0`.
pub async fn spawn_serve_with(s: &Sandbox, extra: &[&str]) -> (Child, String) {
    let args: Vec<&str> = ["serve", "--port", "0"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let mut serve = s
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = server_address(&mut serve)
        .await
        .expect("the server's address");
    (serve, base)
}

/// The address `taskforce serve` prints on its first line of stdout (`None` when it prints
/// something else first).
pub async fn server_address(serve: &mut Child) -> Option<String> {
    let stdout = serve.stdout.take()?;
    tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).ok()?;
        line.trim()
            .strip_prefix("taskforce server listening on ")
            .map(str::to_string)
    })
    .await
    .ok()
    .flatten()
}
