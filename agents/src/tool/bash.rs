//! `bash {command, timeout?, description?}`: runs a shell command in the session directory.
//!
//! The command runs as `sh -c <command>` in its own process group, with stdin closed and stdout
//! and stderr captured together in arrival order. A timeout (default 2 minutes, at most 10) or an
//! abort kills the whole group; dropping the call kills it too.
//!
//! Permission: `bash` with one pattern per simple command of the text (split at unquoted `;`,
//! `&&`, `||`, `|`, `&` and newlines; a single command gives `[command text]`), and `always`
//! = each command's prefix from [`command_prefix`] plus `" *"`. Arguments of `cd`, `rm`, `cp`,
//! `mv`, `mkdir`, `touch`, `chmod`, `chown` and `cat` outside the project first ask
//! `external_directory`.

use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;
use tokio::time::Sleep;

use super::paths::{self, PathKind};
use super::run::{lenient_u64, parse_args};
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::permission::PermissionAsk;

const ID: &str = "bash";

/// The timeout when the model gives none.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// The longest timeout a model may ask for.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Output kept in memory; more is counted and dropped.
const MAX_CAPTURE: usize = 10 * 1024 * 1024;

/// The most output characters put in the live metadata.
const MAX_METADATA_LENGTH: usize = 30_000;

/// How long to wait for the output pipes to close once the shell has exited (a background
/// process may keep them open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// How often the live output is published while the command runs.
const METADATA_INTERVAL: Duration = Duration::from_millis(250);

/// How many leading words name a command, for the `always` pattern of a bash ask.
///
/// The longest matching prefix wins; a command not listed has arity 1 (its first word).
/// For example `git status --short` → `git status`, `npm run build` → `npm run build`,
/// `docker compose up -d` → `docker compose up`, `cargo test -p x` → `cargo test`.
pub const ARITY: &[(&str, usize)] = &[
    ("apt", 2),
    ("apt-get", 2),
    ("aws", 3),
    ("az", 3),
    ("brew", 2),
    ("bun", 2),
    ("bun run", 3),
    ("bundle", 2),
    ("bundle exec", 3),
    ("cargo", 2),
    ("composer", 2),
    ("conda", 2),
    ("deno", 2),
    ("deno task", 3),
    ("docker", 2),
    ("docker compose", 3),
    ("docker-compose", 2),
    ("dotnet", 2),
    ("gcloud", 3),
    ("gh", 3),
    ("git", 2),
    ("git config", 3),
    ("git remote", 3),
    ("git stash", 3),
    ("go", 2),
    ("go mod", 3),
    ("gradle", 2),
    ("./gradlew", 2),
    ("helm", 2),
    ("kubectl", 2),
    ("make", 2),
    ("mvn", 2),
    ("npm", 2),
    ("npm run", 3),
    ("npx", 2),
    ("pip", 2),
    ("pip3", 2),
    ("pnpm", 2),
    ("pnpm run", 3),
    ("poetry", 2),
    ("poetry run", 3),
    ("python -m", 3),
    ("python3 -m", 3),
    ("rustup", 2),
    ("systemctl", 2),
    ("terraform", 2),
    ("uv", 2),
    ("uv pip", 3),
    ("uv run", 3),
    ("yarn", 2),
    ("yarn run", 3),
];

/// Commands whose arguments are paths worth an `external_directory` check.
const PATH_COMMANDS: &[&str] = &[
    "cd", "rm", "cp", "mv", "mkdir", "touch", "chmod", "chown", "cat",
];

/// The words naming the command `tokens` runs, per [`ARITY`]: `git status --short` →
/// `["git", "status"]`; an unknown command gives its first word.
pub fn command_prefix(tokens: &[String]) -> Vec<String> {
    let mut arity = 1;
    let mut matched = 0;
    for (prefix, n) in ARITY {
        let words: Vec<&str> = prefix.split(' ').collect();
        if words.len() > matched
            && tokens.len() >= words.len()
            && words.iter().zip(tokens).all(|(w, t)| w == t)
        {
            matched = words.len();
            arity = *n;
        }
    }
    tokens.iter().take(arity).cloned().collect()
}

/// One simple command of a command line: its source text and its words (quotes removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    pub text: String,
    pub tokens: Vec<String>,
}

/// Splits a command line at unquoted `;`, `&&`, `||`, `|`, `&` and newlines, and each part into
/// words (single and double quotes and backslashes honoured, `2>&1`-style redirections kept).
pub(crate) fn split_commands(line: &str) -> Vec<SimpleCommand> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut commands = Vec::new();
    let mut tokens: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut start = 0usize;
    let mut i = 0usize;
    let finish =
        |commands: &mut Vec<SimpleCommand>, tokens: &mut Vec<String>, end: usize, start: usize| {
            let text = line[start..end].trim().to_string();
            if !text.is_empty() && !tokens.is_empty() {
                commands.push(SimpleCommand {
                    text,
                    tokens: std::mem::take(tokens),
                });
            }
            tokens.clear();
        };
    while i < chars.len() {
        let (pos, c) = chars[i];
        let next = chars.get(i + 1).map(|&(_, c)| c);
        match c {
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i].1 != '\'' {
                    word.push(chars[i].1);
                    i += 1;
                }
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i].1 != '"' {
                    if chars[i].1 == '\\'
                        && let Some(&(_, escaped)) = chars.get(i + 1)
                        && matches!(escaped, '"' | '\\' | '$' | '`')
                    {
                        i += 1;
                    }
                    word.push(chars[i].1);
                    i += 1;
                }
            }
            '\\' => {
                in_word = true;
                if let Some(escaped) = next {
                    if escaped != '\n' {
                        word.push(escaped);
                    }
                    i += 1;
                }
            }
            ' ' | '\t' => {
                if in_word {
                    tokens.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            ';' | '\n' | '|' | '&' => {
                let previous = i.checked_sub(1).map(|j| chars[j].1);
                // `2>&1`, `&>file`, `>|file`: redirections, not separators.
                let redirect = (c == '&'
                    && (matches!(previous, Some('>' | '<')) || next == Some('>')))
                    || (c == '|' && previous == Some('>'));
                if redirect {
                    in_word = true;
                    word.push(c);
                } else {
                    if in_word {
                        tokens.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                    finish(&mut commands, &mut tokens, pos, start);
                    if (c == '&' && next == Some('&')) || (c == '|' && next == Some('|')) {
                        i += 1;
                    }
                    start = chars.get(i + 1).map_or(line.len(), |&(p, _)| p);
                }
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
        i += 1;
    }
    if in_word {
        tokens.push(word);
    }
    finish(&mut commands, &mut tokens, line.len(), start);
    commands
}

/// The bash tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

#[derive(Debug, Deserialize)]
struct Args {
    command: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    timeout: Option<u64>,
    #[serde(default)]
    description: Option<String>,
}

#[async_trait]
impl Tool for BashTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/bash.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to execute"},
                "timeout": {"type": "integer", "minimum": 1, "description": "Optional timeout in milliseconds (default 120000, at most 600000)"},
                "description": {"type": "string", "description": "Clear, concise description of what this command does in 5-10 words"}
            },
            "required": ["command"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let invalid = |message: &str| ToolError::InvalidArguments {
            tool: ID.into(),
            message: message.into(),
        };
        if args.command.trim().is_empty() {
            return Err(invalid("command: must not be empty"));
        }
        let timeout = match args.timeout {
            Some(0) => {
                return Err(invalid(
                    "timeout: must be a positive number of milliseconds",
                ));
            }
            Some(ms) => Duration::from_millis(ms).min(MAX_TIMEOUT),
            None => DEFAULT_TIMEOUT,
        };

        let commands = split_commands(&args.command);
        ask_external_paths(ctx, &commands).await?;
        let mut patterns: Vec<String> = Vec::new();
        let mut always: Vec<String> = Vec::new();
        for command in &commands {
            push_unique(&mut patterns, command.text.clone());
            push_unique(
                &mut always,
                format!("{} *", command_prefix(&command.tokens).join(" ")),
            );
        }
        if patterns.is_empty() {
            patterns.push(args.command.trim().to_string());
            always.push(format!(
                "{} *",
                args.command.split_whitespace().next().unwrap_or_default()
            ));
        }
        let mut ask_metadata = Map::new();
        ask_metadata.insert("command".into(), Value::String(args.command.clone()));
        ask_metadata.insert("description".into(), json!(args.description));
        ctx.ask(PermissionAsk {
            permission: "bash".into(),
            patterns,
            always,
            metadata: ask_metadata,
        })
        .await?;

        let run = run_command(&args.command, timeout, ctx, args.description.as_deref()).await?;
        let mut output = if run.output.is_empty() {
            "(no output)".to_string()
        } else {
            run.output.clone()
        };
        let mut notes = Vec::new();
        if run.dropped > 0 {
            notes.push(format!(
                "{} bytes of further output were not captured",
                run.dropped
            ));
        }
        if run.timed_out {
            notes.push(format!(
                "bash tool terminated command after exceeding timeout {} ms",
                timeout.as_millis()
            ));
        } else if let Some(status) = run.status {
            match (status.code(), signal(&status)) {
                (Some(0), _) => {}
                (Some(code), _) => notes.push(format!("exit code: {code}")),
                (None, Some(sig)) => notes.push(format!("terminated by signal {sig}")),
                (None, None) => notes.push("terminated abnormally".into()),
            }
        }
        if !notes.is_empty() {
            if !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&format!(
                "\n<bash_metadata>\n{}\n</bash_metadata>",
                notes.join("\n")
            ));
        }

        let mut metadata = Map::new();
        metadata.insert("output".into(), Value::String(preview(&run.output)));
        metadata.insert(
            "exit".into(),
            json!(run.status.and_then(|s| s.code()).filter(|_| !run.timed_out)),
        );
        metadata.insert("description".into(), json!(args.description));
        if run.timed_out {
            metadata.insert("timedOut".into(), Value::Bool(true));
        }
        Ok(ToolOutput {
            title: args.description.unwrap_or(args.command),
            output,
            metadata: metadata.into(),
        })
    }
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// The signal that ended the process, if one did.
fn signal(status: &ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(status)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// The head of `output` for metadata.
fn preview(output: &str) -> String {
    match output.char_indices().nth(MAX_METADATA_LENGTH) {
        Some((end, _)) => format!("{}\n\n...", &output[..end]),
        None => output.to_string(),
    }
}

/// Asks `external_directory` once for every path argument of a path command outside the
/// project.
async fn ask_external_paths(
    ctx: &ToolContext,
    commands: &[SimpleCommand],
) -> Result<(), ToolError> {
    let mut globs: Vec<String> = Vec::new();
    for command in commands {
        let Some((program, args)) = command.tokens.split_first() else {
            continue;
        };
        if !PATH_COMMANDS.contains(&program.as_str()) {
            continue;
        }
        for arg in args {
            if arg.starts_with('-') || (program == "chmod" && arg.starts_with('+')) {
                continue;
            }
            // Expansions cannot be resolved without running the shell.
            if arg.contains(['$', '`', '*', '?', '~']) || arg.is_empty() {
                continue;
            }
            let path = paths::resolve(&ctx.directory, arg);
            if !paths::is_external(ctx, &path) {
                continue;
            }
            let kind = if program == "cd" || path.is_dir() {
                PathKind::Directory
            } else {
                PathKind::File
            };
            push_unique(&mut globs, paths::external_glob(&path, kind));
        }
    }
    if globs.is_empty() {
        return Ok(());
    }
    ctx.ask(PermissionAsk {
        permission: "external_directory".into(),
        patterns: globs.clone(),
        always: globs,
        metadata: Map::new(),
    })
    .await
}

/// What a finished (or timed-out) command left.
struct Run {
    output: String,
    dropped: usize,
    status: Option<ExitStatus>,
    timed_out: bool,
}

/// Kills the process group when dropped while armed (a call dropped mid-run).
struct GroupGuard {
    pid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("kill -s KILL -- -{pid} 2>/dev/null"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Kills the process group led by `pid`.
pub(crate) async fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(format!("kill -s KILL -- -{pid} 2>/dev/null"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
}

/// Reads from a pipe that may already be closed (then never resolves).
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Waits for an optional timer (never resolves without one).
async fn wait_for(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(timer) => timer.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Output collected in arrival order, capped at [`MAX_CAPTURE`].
#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    dropped: usize,
}

impl Capture {
    fn push(&mut self, chunk: &[u8]) {
        let room = MAX_CAPTURE.saturating_sub(self.bytes.len());
        let kept = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..kept]);
        self.dropped += chunk.len() - kept;
    }
}

/// Runs `command` with `sh -c` in `ctx.directory` until it exits, times out or is aborted.
async fn run_command(
    command: &str,
    timeout: Duration,
    ctx: &ToolContext,
    description: Option<&str>,
) -> Result<Run, ToolError> {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.directory)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        ToolError::Failed(format!(
            "Failed to start the command in {}: {e}",
            ctx.directory.display()
        ))
    })?;
    let pid = child.id();
    let mut guard = GroupGuard { pid };
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut capture = Capture::default();
    let (mut out_buf, mut err_buf) = ([0u8; 8192], [0u8; 8192]);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut grace: Option<Pin<Box<Sleep>>> = None;
    let mut status: Option<ExitStatus> = None;
    let mut timed_out = false;
    let mut tick = tokio::time::interval(METADATA_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut published = 0usize;

    while status.is_none() || stdout.is_some() || stderr.is_some() {
        tokio::select! {
            biased;
            () = ctx.abort.cancelled() => {
                kill_group(pid).await;
                let _ = child.start_kill();
                let _ = child.wait().await;
                guard.pid = None;
                return Err(ToolError::Aborted);
            }
            () = &mut deadline, if !timed_out && status.is_none() => {
                timed_out = true;
                kill_group(pid).await;
                let _ = child.start_kill();
                guard.pid = None;
            }
            read = read_some(&mut stdout, &mut out_buf) => match read {
                Ok(0) | Err(_) => stdout = None,
                Ok(n) => capture.push(&out_buf[..n]),
            },
            read = read_some(&mut stderr, &mut err_buf) => match read {
                Ok(0) | Err(_) => stderr = None,
                Ok(n) => capture.push(&err_buf[..n]),
            },
            waited = child.wait(), if status.is_none() => {
                match waited {
                    Ok(s) => status = Some(s),
                    Err(e) => {
                        return Err(ToolError::Failed(format!("Failed to wait for the command: {e}")));
                    }
                }
                guard.pid = None;
                grace = Some(Box::pin(tokio::time::sleep(DRAIN_GRACE)));
            }
            () = wait_for(&mut grace) => break,
            _ = tick.tick() => {
                if capture.bytes.len() != published {
                    published = capture.bytes.len();
                    let mut metadata = Map::new();
                    let text = String::from_utf8_lossy(&capture.bytes);
                    metadata.insert("output".into(), Value::String(preview(&text)));
                    metadata.insert("description".into(), json!(description));
                    ctx.metadata(None, metadata);
                }
            }
        }
    }
    Ok(Run {
        output: String::from_utf8_lossy(&capture.bytes).into_owned(),
        dropped: capture.dropped,
        status,
        timed_out,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn prefixes_follow_the_arity_table() {
        for (command, prefix) in [
            ("git status --short", "git status"),
            ("npm run build", "npm run build"),
            ("npm install", "npm install"),
            ("cargo test -p x", "cargo test"),
            ("docker compose up -d", "docker compose up"),
            ("ls -la", "ls"),
            ("frobnicate --all", "frobnicate"),
            ("git", "git"),
        ] {
            assert_eq!(
                command_prefix(&words(command)).join(" "),
                prefix,
                "{command}"
            );
        }
    }

    #[test]
    fn splits_command_lines() {
        let c = split_commands("git status --short");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "git status --short");
        let c = split_commands("cd 'a b' && cargo test 2>&1 | tail -n 5; echo \"x;y\" &");
        let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            vec!["cd 'a b'", "cargo test 2>&1", "tail -n 5", "echo \"x;y\""]
        );
        assert_eq!(c[0].tokens, vec!["cd", "a b"]);
        assert_eq!(c[3].tokens, vec!["echo", "x;y"]);
        assert!(split_commands("   ").is_empty());
    }

    #[tokio::test]
    async fn captures_output_and_exit_code_in_the_directory() {
        let p = Project::new();
        std::fs::create_dir(p.root.join("sub")).unwrap();
        let mut ctx = p.ctx();
        ctx.directory = p.root.join("sub");
        let out = BashTool
            .execute(
                json!({"command": "pwd; echo err >&2; exit 3", "description": "Print dir"}),
                &ctx,
            )
            .await
            .unwrap();
        assert!(
            out.output
                .starts_with(&format!("{}\nerr\n", p.root.join("sub").display())),
            "{}",
            out.output
        );
        assert!(
            out.output
                .ends_with("<bash_metadata>\nexit code: 3\n</bash_metadata>"),
            "{}",
            out.output
        );
        assert_eq!(out.metadata["exit"], 3);
        assert_eq!(out.title, "Print dir");
        let asks = p.asks();
        assert_eq!(asks[0].permission, "bash");
        assert_eq!(asks[0].patterns, vec!["pwd", "echo err >&2", "exit 3"]);
        assert_eq!(asks[0].always, vec!["pwd *", "echo *", "exit *"]);
    }

    #[tokio::test]
    async fn timeout_kills_the_group() {
        let p = Project::new();
        let started = Instant::now();
        let out = BashTool
            .execute(
                json!({"command": "echo start; sleep 30 & sleep 30", "timeout": 300}),
                &p.ctx(),
            )
            .await
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(out.output.starts_with("start\n"), "{}", out.output);
        assert!(
            out.output
                .contains("bash tool terminated command after exceeding timeout 300 ms")
        );
        assert_eq!(out.metadata["timedOut"], true);
        assert_eq!(out.metadata["exit"], Value::Null);
    }

    #[tokio::test]
    async fn zero_timeout_is_invalid() {
        let p = Project::new();
        let err = BashTool
            .execute(json!({"command": "true", "timeout": 0}), &p.ctx())
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    }
}
