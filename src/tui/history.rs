//! The prompts sent from the TUI, kept across runs (one JSON string per line) so that Up
//! brings back what was sent last time: `$XDG_STATE_HOME/taskforce/prompt-history.jsonl`, else
//! `~/.local/state/taskforce/prompt-history.jsonl`.

use std::io::Write;
use std::path::{Path, PathBuf};

/// How many prompts are kept (older ones are dropped when the file is read).
const KEEP: usize = 200;

/// Where the history lives, from an environment lookup.
pub fn path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let state = env("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| Path::new(&home).join(".local").join("state"))
        })?;
    Some(state.join("taskforce").join("prompt-history.jsonl"))
}

/// The newest prompts, oldest first (none when the file is missing or unreadable; a line that
/// is not a JSON string is skipped).
pub fn load(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let all: Vec<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<String>(line).ok())
        .collect();
    all[all.len().saturating_sub(KEEP)..].to_vec()
}

/// Adds `prompt` to the file (a failure to write is only logged: history is a convenience).
pub fn append(path: &Path, prompt: &str) {
    let written = (|| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let line = serde_json::to_string(prompt).map_err(std::io::Error::other)?;
        writeln!(file, "{line}")
    })();
    if let Err(e) = written {
        tracing::warn!("cannot keep the prompt history in {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_survive_a_restart_multi_line_ones_whole_and_broken_lines_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(|k| (k == "HOME").then(|| dir.path().display().to_string())).unwrap();
        assert!(file.ends_with(".local/state/taskforce/prompt-history.jsonl"));
        append(&file, "first");
        append(&file, "two\nlines");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .and_then(|mut f| writeln!(f, "not json"))
            .unwrap();
        assert_eq!(load(&file), ["first", "two\nlines"]);
        let state = path(|k| (k == "XDG_STATE_HOME").then(|| "/state".to_string())).unwrap();
        assert_eq!(state, Path::new("/state/taskforce/prompt-history.jsonl"));
    }
}
