//! Tool output truncation: outputs over 2000 lines or 50 KB keep their head,
//! the full text is saved to `<data_dir>/tool-output/tool_<id>`, and a hint tells the model how
//! to get at the rest.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::{ToolContext, ToolOutput};
use crate::agent::AgentInfo;
use crate::id::PartId;
use crate::permission::{self, Action};

/// The most lines an output keeps.
pub const MAX_LINES: usize = 2000;

/// The most bytes an output keeps.
pub const MAX_BYTES: usize = 50 * 1024;

/// The folder below the data directory where full outputs are saved.
pub const OUTPUT_DIR: &str = "tool-output";

/// How long saved outputs are kept before [`cleanup`] removes them.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Which end of an over-long output is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Keep the first lines.
    #[default]
    Head,
    /// Keep the last lines.
    Tail,
}

/// The kept part of an over-long text and how much was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The lines kept, joined with `\n`.
    pub preview: String,
    /// How many lines or bytes were removed.
    pub removed: usize,
    /// `"lines"` or `"bytes"`: the unit of `removed` (bytes when the byte limit was hit).
    pub unit: &'static str,
}

/// The result of [`truncate_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The text the model sees.
    pub content: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// Where the full text was saved, when it was cut and saving worked.
    pub output_path: Option<PathBuf>,
}

/// Cuts `text` to `max_lines` lines and `max_bytes` bytes at line boundaries; `None` when it
/// already fits.
pub fn cut(text: &str, max_lines: usize, max_bytes: usize, direction: Direction) -> Option<Cut> {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() <= max_lines && text.len() <= max_bytes {
        return None;
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut bytes = 0usize;
    let mut hit_bytes = false;
    let ordered: Box<dyn Iterator<Item = &&str>> = match direction {
        Direction::Head => Box::new(lines.iter()),
        Direction::Tail => Box::new(lines.iter().rev()),
    };
    for line in ordered.take(max_lines) {
        let size = line.len() + usize::from(!kept.is_empty());
        if bytes + size > max_bytes {
            hit_bytes = true;
            break;
        }
        kept.push(line);
        bytes += size;
    }
    // A single line longer than the byte limit: keep a piece of it rather than nothing.
    if kept.is_empty()
        && let Some(first) = match direction {
            Direction::Head => lines.first(),
            Direction::Tail => lines.last(),
        }
    {
        let piece = match direction {
            Direction::Head => &first[..floor_char_boundary(first, max_bytes)],
            Direction::Tail => {
                let start = first.len().saturating_sub(max_bytes);
                &first[ceil_char_boundary(first, start)..]
            }
        };
        kept.push(piece);
        bytes = piece.len();
    }
    if direction == Direction::Tail {
        kept.reverse();
    }
    let (removed, unit) = if hit_bytes {
        (text.len().saturating_sub(bytes), "bytes")
    } else {
        (lines.len() - kept.len(), "lines")
    };
    Some(Cut {
        preview: kept.join("\n"),
        removed,
        unit,
    })
}

/// The largest char boundary of `s` at or below `index`.
pub(crate) fn floor_char_boundary(s: &str, index: usize) -> usize {
    let mut i = index.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary of `s` at or above `index`.
fn ceil_char_boundary(s: &str, index: usize) -> usize {
    let mut i = index.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Whether `agent` may use the task tool at all (its `task` permission for `*` is not deny);
/// decides which hint a truncated output gets.
pub fn can_delegate(agent: &AgentInfo) -> bool {
    permission::evaluate("task", "*", &[&agent.permission]).action != Action::Deny
}

/// The hint appended to a truncated output whose full text is at `path`.
pub fn hint(path: &Path, delegate: bool) -> String {
    let head = format!(
        "The tool call succeeded but the output was truncated. Full output saved to: {}\n",
        path.display()
    );
    if delegate {
        head + "Use the Task tool to have explore agent process this file with Grep and Read (with offset/limit). Do NOT read the full file yourself - delegate to save context."
    } else {
        head + "Use Grep to search the full content or Read with offset/limit to view specific sections."
    }
}

/// The folder where full outputs are saved for `data_dir`.
pub fn output_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(OUTPUT_DIR)
}

/// Truncates `text` for `ctx`'s agent with the default limits, saving the full text when cut.
///
/// Saving never fails the call: when the file cannot be written the model is told so instead
/// of getting a path.
pub async fn truncate_output(text: String, ctx: &ToolContext) -> Truncation {
    truncate_with(
        text,
        &ctx.data_dir,
        can_delegate(&ctx.agent),
        MAX_LINES,
        MAX_BYTES,
        Direction::Head,
    )
    .await
}

/// [`truncate_output`] with explicit limits, direction and hint choice.
pub async fn truncate_with(
    text: String,
    data_dir: &Path,
    delegate: bool,
    max_lines: usize,
    max_bytes: usize,
    direction: Direction,
) -> Truncation {
    let Some(cut) = cut(&text, max_lines, max_bytes, direction) else {
        return Truncation {
            content: text,
            truncated: false,
            output_path: None,
        };
    };
    let dir = output_dir(data_dir);
    let path = dir.join(format!("tool_{}", PartId::new().body()));
    let saved = match tokio::fs::create_dir_all(&dir).await {
        Ok(()) => tokio::fs::write(&path, text.as_bytes()).await,
        Err(e) => Err(e),
    };
    let (hint, output_path) = match saved {
        Ok(()) => (hint(&path, delegate), Some(path)),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "could not save truncated tool output");
            (
                format!(
                    "The tool call succeeded but the output was truncated, and the full output could not be saved ({e})."
                ),
                None,
            )
        }
    };
    let marker = format!("...{} {} truncated...", cut.removed, cut.unit);
    let content = match direction {
        Direction::Head => format!("{}\n\n{marker}\n\n{hint}", cut.preview),
        Direction::Tail => format!("{marker}\n\n{hint}\n\n{}", cut.preview),
    };
    Truncation {
        content,
        truncated: true,
        output_path,
    }
}

/// Truncates `output.output` in place and records `truncated` (and `outputPath`) in its metadata.
pub async fn apply(mut output: ToolOutput, ctx: &ToolContext) -> ToolOutput {
    let text = std::mem::take(&mut output.output);
    let result = truncate_output(text, ctx).await;
    output.output = result.content;
    output
        .metadata
        .insert("truncated".into(), Value::Bool(result.truncated));
    if let Some(path) = result.output_path {
        output.metadata.insert(
            "outputPath".into(),
            Value::String(path.display().to_string()),
        );
    }
    output
}

/// Removes saved outputs older than [`RETENTION`] from `<data_dir>/tool-output`; returns how
/// many were removed. A missing folder is not an error.
pub async fn cleanup(data_dir: &Path) -> std::io::Result<usize> {
    let dir = output_dir(data_dir);
    tokio::task::spawn_blocking(move || {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|modified| now.duration_since(modified).ok())
                .is_some_and(|age| age > RETENTION);
            let ours = entry.file_name().to_string_lossy().starts_with("tool_");
            if old && ours && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    })
    .await
    .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_not_cut() {
        assert_eq!(cut("a\nb", 2, 10, Direction::Head), None);
    }

    #[test]
    fn line_limit_keeps_the_head() {
        let text = (1..=10)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let c = cut(&text, 3, 1000, Direction::Head).unwrap();
        assert_eq!(c.preview, "1\n2\n3");
        assert_eq!((c.removed, c.unit), (7, "lines"));
        let c = cut(&text, 3, 1000, Direction::Tail).unwrap();
        assert_eq!(c.preview, "8\n9\n10");
    }

    #[test]
    fn byte_limit_counts_bytes() {
        let text = "aaaa\nbbbb\ncccc";
        let c = cut(text, 100, 9, Direction::Head).unwrap();
        assert_eq!(c.preview, "aaaa\nbbbb");
        assert_eq!((c.removed, c.unit), (5, "bytes"));
    }

    #[test]
    fn one_huge_line_keeps_a_piece_on_a_char_boundary() {
        let text = "é".repeat(10);
        let c = cut(&text, 100, 5, Direction::Head).unwrap();
        assert_eq!(c.preview, "éé");
        assert_eq!(c.removed, 16);
        let c = cut(&text, 100, 5, Direction::Tail).unwrap();
        assert_eq!(c.preview, "éé");
    }

    #[test]
    fn hints_differ_by_task_permission() {
        let p = Path::new("/d/tool-output/tool_1");
        assert!(hint(p, true).contains("Use the Task tool to have explore agent"));
        assert!(hint(p, false).contains("Use Grep to search the full content"));
        assert!(hint(p, false).starts_with(
            "The tool call succeeded but the output was truncated. Full output saved to: /d/tool-output/tool_1\n"
        ));
    }

    #[tokio::test]
    async fn cleanup_of_a_missing_folder_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cleanup(dir.path()).await.unwrap(), 0);
        let out = output_dir(dir.path());
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("tool_new"), "x").unwrap();
        assert_eq!(cleanup(dir.path()).await.unwrap(), 0);
        assert!(out.join("tool_new").exists());
    }
}
