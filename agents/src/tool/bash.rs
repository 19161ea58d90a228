//! `bash {command, timeout?, description?}`: runs a shell command in the session directory.
//!
//! The command runs as `sh -c <command>` in its own process group, with stdin closed and stdout
//! and stderr captured together in arrival order. A timeout (default 2 minutes, at most 10) or an
//! abort kills the whole group; dropping the call kills it too.
//!
//! Permission: the asks of [`bash_asks`]: `external_directory` for the paths the line names
//! outside the project (resolved through symbolic links), `read` for the paths the read rules
//! guard, then `bash` with one pattern per command the line runs (parsed with the bash grammar,
//! wrappers such as `sudo` or `xargs` peeled: [`crate::permission::bash`]) and `always` = each
//! command's prefix from [`command_prefix`] plus `" *"`. The ask's metadata keeps the command
//! as written.

use std::path::Path;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;
use tokio::time::Sleep;

use super::bash_asks::{BashScope, bash_asks};
use super::run::{lenient_u64, parse_args};
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
pub use crate::permission::bash::{ARITY, command_prefix};

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

        let mut ask_metadata = Map::new();
        ask_metadata.insert("command".into(), Value::String(args.command.clone()));
        ask_metadata.insert("description".into(), json!(args.description));
        let scope = BashScope {
            directory: &ctx.directory,
            project_root: &ctx.project_root,
            home: ctx.home.as_deref(),
            rules: &ctx.agent.permission,
        };
        for ask in bash_asks(&args.command, &scope, ask_metadata) {
            ctx.ask(ask).await?;
        }

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
            attachments: Vec::new(),
        })
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

/// `sh -c command` in `cwd`, its output piped and no input, leading a process group of its own
/// (so [`kill_group`] reaches what it starts) and killed when dropped.
pub(crate) fn shell_command(command: &str, cwd: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    cmd
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
    let mut cmd = shell_command(command, &ctx.directory);
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
