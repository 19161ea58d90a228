//! `` !`cmd` `` in a command template: replaced by the command's output.
//!
//! Each `` !`cmd` `` (a non-empty run without backticks between the backticks) runs with
//! `sh -c` in the session directory, one after another in order, and is replaced by its
//! standard output without the trailing newline. A command that cannot start, exits non-zero
//! or runs past [`SHELL_TIMEOUT`] is replaced by `Error executing command: ` and its trimmed
//! standard error (or what went wrong). The substitution is a single pass: output that itself
//! contains `` !`…` `` is inserted as is. Unlike OpenCode, which runs them concurrently and
//! keeps the standard output of a failing command, commands run in sequence and a non-zero exit
//! counts as a failure.
//!
//! Before it runs, each command goes through the permission asks of the bash tool
//! ([`bash_asks`]: its paths, then every command it runs), answered by a [`ShellGate`] (the
//! runtime asks the user as it does for the tool). A command refused (denied, or an ask the
//! user rejects) does not run and is replaced by the error text like a failed one.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::template::{Piece, expand_pieces};
use crate::permission::{PermissionAsk, PermissionError};
use crate::tool::{BashScope, bash_asks, kill_group, shell_command};

/// Answers the permission asks of a template's commands.
#[async_trait]
pub trait ShellGate: Send + Sync {
    /// Resolves when `ask` is allowed (by the rules or by the user); an error refuses it.
    async fn ask(&self, ask: PermissionAsk) -> Result<(), PermissionError>;
}

/// Where a template's commands run and who answers their permission asks.
#[derive(Clone, Copy)]
pub struct ShellContext<'a> {
    /// The working directory, the project and the rules for the commands' paths.
    pub scope: BashScope<'a>,
    /// Answers the asks.
    pub gate: &'a dyn ShellGate,
}

/// How long one substituted command may run.
pub const SHELL_TIMEOUT: Duration = Duration::from_secs(60);

/// The prefix of the text that replaces a failed command.
const ERROR_PREFIX: &str = "Error executing command: ";

/// Expands `template` with `arguments` ([`expand_pieces`]) and replaces each of its
/// `` !`cmd` `` by the output of running `cmd`, once its permission asks are allowed.
pub async fn render(template: &str, arguments: &str, shell: ShellContext<'_>) -> String {
    run_pieces(expand_pieces(template, arguments), shell, SHELL_TIMEOUT).await
}

/// Replaces every `` !`cmd` `` in `text` by the output of running `cmd` (no arguments).
pub async fn substitute_shell(text: &str, shell: ShellContext<'_>) -> String {
    run_pieces(pieces(text), shell, SHELL_TIMEOUT).await
}

/// `text` as pieces, without trimming or arguments.
fn pieces(text: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut pos = 0;
    for (whole, command) in super::template::shell_spans(text) {
        pieces.push(Piece::Text(text[pos..whole.start].to_string()));
        pieces.push(Piece::Shell(text[command].to_string()));
        pos = whole.end;
    }
    pieces.push(Piece::Text(text[pos..].to_string()));
    pieces
}

/// Joins `pieces`, running the commands one after another with `timeout` each.
async fn run_pieces(pieces: Vec<Piece>, shell: ShellContext<'_>, timeout: Duration) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Shell(command) => match permitted(&command, shell).await {
                Ok(()) => match run(&command, shell.scope.directory, timeout).await {
                    Ok(stdout) => out.push_str(&stdout),
                    Err(error) => {
                        out.push_str(ERROR_PREFIX);
                        out.push_str(&error);
                    }
                },
                Err(refused) => {
                    out.push_str(ERROR_PREFIX);
                    out.push_str(&refused.to_string());
                }
            },
        }
    }
    out
}

/// Asks every permission `command` needs, in order; the first refusal stops.
async fn permitted(command: &str, shell: ShellContext<'_>) -> Result<(), PermissionError> {
    let mut metadata = Map::new();
    metadata.insert("command".into(), Value::String(command.to_string()));
    metadata.insert("source".into(), Value::String("command template".into()));
    for ask in bash_asks(command, &shell.scope, metadata) {
        shell.gate.ask(ask).await?;
    }
    Ok(())
}

/// Runs `command` with `sh -c` in `cwd`: its stdout without trailing newlines, or the error text.
async fn run(command: &str, cwd: &Path, timeout: Duration) -> Result<String, String> {
    let mut cmd = shell_command(command, cwd);
    let child = cmd
        .spawn()
        .map_err(|e| format!("failed to start `{command}` in {}: {e}", cwd.display()))?;
    let pid = child.id();
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("failed to run `{command}`: {e}")),
        // Dropping the future killed the shell; its children go with the process group.
        Err(_) => {
            kill_group(pid).await;
            return Err(format!(
                "`{command}` timed out after {} s",
                timeout.as_secs_f64()
            ));
        }
    };
    if output.status.success() {
        let stdout = String::from_utf8_lossy(&output.stdout);
        Ok(stdout.trim_end_matches(['\n', '\r']).to_string())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        if stderr.is_empty() {
            Err(format!("`{command}` failed with {}", output.status))
        } else {
            Err(stderr.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::permission::{self, Action, AskDecision, Rule};

    /// Answers asks from fixed rules (ask → rejected, as when nobody can answer) and records
    /// them.
    struct Gate {
        rules: Vec<Rule>,
        asks: Mutex<Vec<PermissionAsk>>,
    }

    impl Gate {
        fn new(rules: Vec<Rule>) -> Gate {
            Gate {
                rules,
                asks: Mutex::default(),
            }
        }
    }

    #[async_trait]
    impl ShellGate for Gate {
        async fn ask(&self, ask: PermissionAsk) -> Result<(), PermissionError> {
            self.asks.lock().unwrap().push(ask.clone());
            match permission::decide(&ask, &[&self.rules]) {
                AskDecision::Allow => Ok(()),
                AskDecision::Deny(rules) => Err(PermissionError::Denied { rules }),
                AskDecision::Ask => Err(PermissionError::Rejected),
            }
        }
    }

    fn allow_all() -> Vec<Rule> {
        vec![Rule::new("*", "*", Action::Allow)]
    }

    fn context<'a>(dir: &'a Path, gate: &'a Gate) -> ShellContext<'a> {
        ShellContext {
            scope: BashScope {
                directory: dir,
                project_root: dir,
                home: None,
                rules: &gate.rules,
            },
            gate,
        }
    }

    /// `text` with its commands run in `dir`, everything allowed.
    async fn sub(text: &str, dir: &Path) -> String {
        let gate = Gate::new(allow_all());
        substitute_shell(text, context(dir, &gate)).await
    }

    #[tokio::test]
    async fn echo_is_replaced_by_its_output() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            sub("Say !`echo hello` now", dir.path()).await,
            "Say hello now"
        );
    }

    #[tokio::test]
    async fn commands_run_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        std::fs::write(cwd.join("marker.txt"), "").unwrap();
        assert_eq!(
            sub("in !`pwd -P`: !`ls`", &cwd).await,
            format!("in {}: marker.txt", cwd.display())
        );
    }

    #[tokio::test]
    async fn a_failing_command_inserts_its_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            sub("x !`echo out; echo boom >&2; exit 3` y", dir.path()).await,
            "x Error executing command: boom y"
        );
        let silent = sub("!`exit 4`", dir.path()).await;
        assert!(
            silent.starts_with("Error executing command: `exit 4` failed with exit status: 4"),
            "{silent}"
        );
    }

    #[tokio::test]
    async fn a_command_in_a_missing_directory_fails_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let out = sub("!`echo hi`", &missing).await;
        assert!(
            out.starts_with("Error executing command: failed to start `echo hi`"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn a_slow_command_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let gate = Gate::new(allow_all());
        let shell = context(dir.path(), &gate);
        let out = run_pieces(pieces("a !`sleep 5` b"), shell, Duration::from_millis(200)).await;
        assert_eq!(
            out,
            "a Error executing command: `sleep 5` timed out after 0.2 s b"
        );
        assert!(started.elapsed() < Duration::from_secs(4));
    }

    #[tokio::test]
    async fn two_commands_run_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = sub(
            "!`echo first > f.txt; echo one` then !`cat f.txt; printf 'two\\n\\n'`.",
            dir.path(),
        )
        .await;
        assert_eq!(out, "one then first\ntwo.");
    }

    #[tokio::test]
    async fn output_is_not_substituted_again() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            sub("!`printf '!\\140echo no\\140'`", dir.path()).await,
            "!`echo no`"
        );
    }

    #[tokio::test]
    async fn text_without_commands_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        for text in [
            "",
            "plain text",
            "a `code` span and a bang! and !`` and !`unclosed",
        ] {
            assert_eq!(sub(text, dir.path()).await, text);
        }
    }

    #[tokio::test]
    async fn arguments_cannot_inject_commands() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        std::fs::write(cwd.join("y"), "keep").unwrap();
        let gate = Gate::new(allow_all());
        for argument in ["x; rm y", "$(rm y)", "`rm y`", "'; rm y; '", "!`rm y`"] {
            let out = render("[!`echo $1`] $ARGUMENTS", argument, context(&cwd, &gate)).await;
            assert!(cwd.join("y").exists(), "{argument}: {out}");
            assert!(out.starts_with('['), "{argument}: {out}");
            let out = render("!`printf %s $ARGUMENTS`", argument, context(&cwd, &gate)).await;
            let words = super::super::template::split_arguments(argument);
            assert_eq!(out, words.concat(), "{argument}");
        }
        assert_eq!(
            render("!`echo $1`", "x; rm y", context(&cwd, &gate)).await,
            "x; rm y"
        );
        // Each command was checked as the one intended: `echo` with a quoted word.
        let asks = gate.asks.lock().unwrap();
        let last = asks.last().unwrap();
        assert_eq!(last.permission, "bash");
        assert_eq!(last.patterns, ["echo 'x;' rm y"]);
    }

    #[tokio::test]
    async fn a_denied_command_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        std::fs::write(cwd.join("y"), "keep").unwrap();
        let mut rules = allow_all();
        rules.push(Rule::new("bash", "rm *", Action::Deny));
        let gate = Gate::new(rules);
        for template in ["a !`rm y` b", "!`true && rm y`", "!`sh -c 'rm y'`"] {
            let out = render(template, "", context(&cwd, &gate)).await;
            assert!(cwd.join("y").exists(), "{template}");
            assert!(
                out.contains("Error executing command: The user has specified a rule"),
                "{out}"
            );
        }
        assert_eq!(render("!`echo ok`", "", context(&cwd, &gate)).await, "ok");
    }

    #[tokio::test]
    async fn a_command_nobody_answers_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        std::fs::write(cwd.join("y"), "keep").unwrap();
        let mut rules = allow_all();
        rules.push(Rule::new("bash", "rm *", Action::Ask));
        let gate = Gate::new(rules);
        let out = render("!`rm y`", "", context(&cwd, &gate)).await;
        assert!(cwd.join("y").exists());
        assert_eq!(
            out,
            "Error executing command: The user rejected permission to use this specific tool call."
        );
        // A command that cannot be read is asked too.
        let gate = Gate::new(allow_all());
        let out = render("!`$(echo rm) y`", "", context(&cwd, &gate)).await;
        assert!(cwd.join("y").exists(), "{out}");
        assert!(out.starts_with("Error executing command"), "{out}");
    }
}
