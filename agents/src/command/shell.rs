//! `` !`cmd` `` in a command template: replaced by the command's output (reference §7 S9).
//!
//! Each `` !`cmd` `` (a non-empty run without backticks between the backticks) runs with
//! `sh -c` in the session directory, one after another in order, and is replaced by its
//! standard output without the trailing newline. A command that cannot start, exits non-zero
//! or runs past [`SHELL_TIMEOUT`] is replaced by `Error executing command: ` and its trimmed
//! standard error (or what went wrong). The substitution is a single pass: output that itself
//! contains `` !`…` `` is inserted as is. Unlike OpenCode, which runs them concurrently and
//! keeps the standard output of a failing command, commands run in sequence and a non-zero exit
//! counts as a failure.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::tool::kill_group;

/// How long one substituted command may run.
pub const SHELL_TIMEOUT: Duration = Duration::from_secs(60);

/// The prefix of the text that replaces a failed command.
const ERROR_PREFIX: &str = "Error executing command: ";

/// Replaces every `` !`cmd` `` in `template` by the output of running `cmd` in `cwd`.
pub async fn substitute_shell(template: &str, cwd: &Path) -> String {
    substitute_with_timeout(template, cwd, SHELL_TIMEOUT).await
}

/// [`substitute_shell`] with a chosen timeout per command.
async fn substitute_with_timeout(template: &str, cwd: &Path, timeout: Duration) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some((before, command, after)) = next_command(rest) {
        out.push_str(before);
        match run(command, cwd, timeout).await {
            Ok(stdout) => out.push_str(&stdout),
            Err(error) => {
                out.push_str(ERROR_PREFIX);
                out.push_str(&error);
            }
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The text before the first `` !`cmd` `` in `text`, the command, and the text after it.
fn next_command(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(found) = text[from..].find("!`") {
        let open = from + found;
        let body = &text[open + 2..];
        match body.find('`') {
            // `` !`` `` (empty) is no command; look again after the first backtick.
            Some(0) => from = open + 2,
            Some(close) => {
                return Some((&text[..open], &body[..close], &body[close + 1..]));
            }
            None => return None,
        }
    }
    None
}

/// Runs `command` with `sh -c` in `cwd`: its stdout without trailing newlines, or the error text.
async fn run(command: &str, cwd: &Path, timeout: Duration) -> Result<String, String> {
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
    use super::*;

    #[tokio::test]
    async fn echo_is_replaced_by_its_output() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            substitute_shell("Say !`echo hello` now", dir.path()).await,
            "Say hello now"
        );
    }

    #[tokio::test]
    async fn commands_run_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        std::fs::write(cwd.join("marker.txt"), "").unwrap();
        assert_eq!(
            substitute_shell("in !`pwd -P`: !`ls`", &cwd).await,
            format!("in {}: marker.txt", cwd.display())
        );
    }

    #[tokio::test]
    async fn a_failing_command_inserts_its_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            substitute_shell("x !`echo out; echo boom >&2; exit 3` y", dir.path()).await,
            "x Error executing command: boom y"
        );
        let silent = substitute_shell("!`exit 4`", dir.path()).await;
        assert!(
            silent.starts_with("Error executing command: `exit 4` failed with exit status: 4"),
            "{silent}"
        );
    }

    #[tokio::test]
    async fn a_command_in_a_missing_directory_fails_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let out = substitute_shell("!`echo hi`", &missing).await;
        assert!(
            out.starts_with("Error executing command: failed to start `echo hi`"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn a_slow_command_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let out =
            substitute_with_timeout("a !`sleep 5` b", dir.path(), Duration::from_millis(200)).await;
        assert_eq!(
            out,
            "a Error executing command: `sleep 5` timed out after 0.2 s b"
        );
        assert!(started.elapsed() < Duration::from_secs(4));
    }

    #[tokio::test]
    async fn two_commands_run_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = substitute_shell(
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
            substitute_shell("!`printf '!\\140echo no\\140'`", dir.path()).await,
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
            assert_eq!(substitute_shell(text, dir.path()).await, text);
        }
    }
}
