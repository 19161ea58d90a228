//! `edit {filePath, oldString, newString, replaceAll?}`: exact string replacement in a file, and
//! the small unified diff both file-changing tools show the user.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access;
use super::paths::{self, PathKind};
use super::run::parse_args;
use super::truncate::{MAX_BYTES, floor_char_boundary};
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::model::{FileDiff, FileDiffStatus};

const ID: &str = "edit";

/// The edit tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

#[async_trait]
impl Tool for EditTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/edit.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "description": "The path of the file to modify (absolute, or relative to the working directory)"},
                "oldString": {"type": "string", "description": "The exact text to replace; empty to create a new file"},
                "newString": {"type": "string", "description": "The text to replace it with (must differ from oldString)"},
                "replaceAll": {"type": "boolean", "description": "Replace every occurrence of oldString (default false)"}
            },
            "required": ["filePath", "oldString", "newString"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        if args.old_string == args.new_string {
            return Err(ToolError::Failed(
                "oldString and newString must be different".into(),
            ));
        }
        let path = paths::resolve(&ctx.directory, &args.file_path);
        paths::ask_external_directory(ctx, &path, PathKind::File).await?;
        let rel = paths::relative_to_project(ctx, &path);

        let existing = match tokio::fs::metadata(&path).await {
            Ok(meta) if meta.is_dir() => {
                return Err(ToolError::Failed(format!(
                    "Path is a directory, not a file: {}",
                    path.display()
                )));
            }
            Ok(_) => Some(read_text(&path).await?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(ToolError::Failed(format!(
                    "Cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        let (before, after) = match (&existing, args.old_string.is_empty()) {
            (None, true) => (String::new(), args.new_string.clone()),
            (Some(before), true) if before.is_empty() => (String::new(), args.new_string.clone()),
            (Some(_), true) => {
                return Err(ToolError::Failed(format!(
                    "oldString is empty but {rel} already has content. Give the exact text to replace, or use the write tool to replace the whole file."
                )));
            }
            (None, false) => {
                return Err(ToolError::Failed(format!(
                    "File {} not found",
                    path.display()
                )));
            }
            (Some(before), false) => {
                let after = replace(
                    before,
                    &args.old_string,
                    &args.new_string,
                    args.replace_all.unwrap_or(false),
                )
                .map_err(|e| ToolError::Failed(e.message(&rel)))?;
                (before.clone(), after)
            }
        };

        let diff = unified_diff(&rel, &before, &after);
        let mut ask_metadata = Map::new();
        ask_metadata.insert("filepath".into(), Value::String(path.display().to_string()));
        ask_metadata.insert("diff".into(), Value::String(diff.text.clone()));
        access::ask_edit(ctx, &path, ask_metadata).await?;

        write_file(&path, &after).await?;

        let filediff = FileDiff {
            file: rel.clone(),
            before,
            after,
            additions: diff.additions,
            deletions: diff.deletions,
            status: Some(if existing.is_some() {
                FileDiffStatus::Modified
            } else {
                FileDiffStatus::Added
            }),
        };
        let mut metadata = Map::new();
        metadata.insert("diff".into(), Value::String(diff.text));
        metadata.insert(
            "filediff".into(),
            serde_json::to_value(&filediff).unwrap_or(Value::Null),
        );
        Ok(ToolOutput {
            title: rel,
            output: "Edit applied successfully.".into(),
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }
}

/// Reads a UTF-8 text file for editing.
pub(crate) async fn read_text(path: &std::path::Path) -> Result<String, ToolError> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| ToolError::Failed(format!("Cannot read {}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "{} is not a UTF-8 text file and cannot be edited",
            path.display()
        ))
    })
}

/// Writes `text` to `path`, creating missing parent folders.
pub(crate) async fn write_file(path: &std::path::Path, text: &str) -> Result<(), ToolError> {
    let failed =
        |e: std::io::Error| ToolError::Failed(format!("Cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(failed)?;
    }
    tokio::fs::write(path, text).await.map_err(failed)
}

/// Why a replacement could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplaceError {
    /// `oldString` does not occur.
    NotFound,
    /// `oldString` occurs this many times and `replaceAll` is off.
    Multiple(usize),
}

impl ReplaceError {
    /// The message the model sees, for the file shown as `rel`.
    fn message(self, rel: &str) -> String {
        match self {
            ReplaceError::NotFound => format!(
                "oldString not found in {rel}. It must match the file exactly, including whitespace and indentation; read the file again if unsure."
            ),
            ReplaceError::Multiple(n) => format!(
                "Found {n} matches for oldString in {rel}. Provide more surrounding lines in oldString to identify the correct match, or set replaceAll to true to replace every occurrence."
            ),
        }
    }
}

/// Replaces `old` (non-empty) by `new` in `content`: exactly one occurrence, or all of them with
/// `all`. A file with CRLF line endings also matches an `old` written with `\n`.
pub(crate) fn replace(
    content: &str,
    old: &str,
    new: &str,
    all: bool,
) -> Result<String, ReplaceError> {
    let attempt = |old: &str, new: &str| -> Result<String, ReplaceError> {
        match content.matches(old).count() {
            0 => Err(ReplaceError::NotFound),
            1 => Ok(content.replacen(old, new, 1)),
            _ if all => Ok(content.replace(old, new)),
            n => Err(ReplaceError::Multiple(n)),
        }
    };
    match attempt(old, new) {
        Err(ReplaceError::NotFound)
            if content.contains("\r\n") && old.contains('\n') && !old.contains('\r') =>
        {
            attempt(&old.replace('\n', "\r\n"), &new.replace('\n', "\r\n"))
        }
        other => other,
    }
}

/// A unified diff and its line counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diff {
    /// The diff text (capped at 50 KB).
    pub text: String,
    /// Lines added.
    pub additions: u64,
    /// Lines removed.
    pub deletions: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equal,
    Delete,
    Insert,
}

/// Lines without their `\n`; a final newline does not make an extra empty line.
fn split_lines(s: &str) -> Vec<&str> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.strip_suffix('\n').unwrap_or(s).split('\n').collect()
    }
}

/// The edit script turning `a` into `b`: common head and tail, LCS in between (or, when the
/// changed middle is huge, everything deleted then inserted).
fn edit_script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Op, &'a str)> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut ops: Vec<(Op, &str)> = a[..head].iter().map(|l| (Op::Equal, *l)).collect();
    let (n, m) = (ma.len(), mb.len());
    if n.saturating_mul(m) <= 1_000_000 {
        // lcs[i][j]: length of the LCS of ma[i..] and mb[j..].
        let width = m + 1;
        let mut lcs = vec![0u32; (n + 1) * width];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i * width + j] = if ma[i] == mb[j] {
                    lcs[(i + 1) * width + j + 1] + 1
                } else {
                    lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma[i] == mb[j] {
                ops.push((Op::Equal, ma[i]));
                i += 1;
                j += 1;
            } else if j == m || (i < n && lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
                ops.push((Op::Delete, ma[i]));
                i += 1;
            } else {
                ops.push((Op::Insert, mb[j]));
                j += 1;
            }
        }
    } else {
        ops.extend(ma.iter().map(|l| (Op::Delete, *l)));
        ops.extend(mb.iter().map(|l| (Op::Insert, *l)));
    }
    ops.extend(a[a.len() - tail..].iter().map(|l| (Op::Equal, *l)));
    ops
}

/// A unified diff of `before` → `after` for the file shown as `name`, with 3 lines of context.
pub(crate) fn unified_diff(name: &str, before: &str, after: &str) -> Diff {
    const CONTEXT: usize = 3;
    let a = split_lines(before);
    let b = split_lines(after);
    let ops = edit_script(&a, &b);
    let additions = ops.iter().filter(|(op, _)| *op == Op::Insert).count() as u64;
    let deletions = ops.iter().filter(|(op, _)| *op == Op::Delete).count() as u64;

    // Line numbers (0-based) in the old and new file before each op.
    let mut old_at = Vec::with_capacity(ops.len() + 1);
    let mut new_at = Vec::with_capacity(ops.len() + 1);
    let (mut o, mut n) = (0usize, 0usize);
    for (op, _) in &ops {
        old_at.push(o);
        new_at.push(n);
        match op {
            Op::Equal => {
                o += 1;
                n += 1;
            }
            Op::Delete => o += 1,
            Op::Insert => n += 1,
        }
    }
    old_at.push(o);
    new_at.push(n);

    let mut text = format!(
        "Index: {name}\n===================================================================\n--- {name}\n+++ {name}\n"
    );
    let changes: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, (op, _))| *op != Op::Equal)
        .map(|(i, _)| i)
        .collect();
    let mut k = 0;
    while k < changes.len() {
        let first = changes[k];
        let mut last = first;
        while k + 1 < changes.len() && changes[k + 1] - last <= 2 * CONTEXT + 1 {
            k += 1;
            last = changes[k];
        }
        k += 1;
        let start = first.saturating_sub(CONTEXT);
        let end = (last + 1 + CONTEXT).min(ops.len());
        let old_len = old_at[end] - old_at[start];
        let new_len = new_at[end] - new_at[start];
        let old_start = if old_len == 0 {
            old_at[start]
        } else {
            old_at[start] + 1
        };
        let new_start = if new_len == 0 {
            new_at[start]
        } else {
            new_at[start] + 1
        };
        text.push_str(&format!(
            "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
        ));
        for (op, line) in &ops[start..end] {
            let sign = match op {
                Op::Equal => ' ',
                Op::Delete => '-',
                Op::Insert => '+',
            };
            text.push(sign);
            text.push_str(line);
            text.push('\n');
        }
    }
    if text.len() > MAX_BYTES {
        text.truncate(floor_char_boundary(&text, MAX_BYTES));
        text.push_str("\n... (diff truncated)\n");
    }
    Diff {
        text,
        additions,
        deletions,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    #[test]
    fn replace_needs_exactly_one_match_unless_all() {
        assert_eq!(replace("a b c", "b", "x", false).unwrap(), "a x c");
        assert_eq!(
            replace("a b b", "b", "x", false),
            Err(ReplaceError::Multiple(2))
        );
        assert_eq!(replace("a b b", "b", "x", true).unwrap(), "a x x");
        assert_eq!(replace("a b", "z", "x", true), Err(ReplaceError::NotFound));
        assert_eq!(
            replace("one\r\ntwo\r\n", "one\ntwo", "1\n2", false).unwrap(),
            "1\r\n2\r\n"
        );
    }

    #[test]
    fn diff_shows_hunks_with_context() {
        let before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
        let after = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n";
        let d = unified_diff("f.txt", before, after);
        assert_eq!((d.additions, d.deletions), (1, 1));
        assert!(
            d.text
                .ends_with("@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"),
            "{}",
            d.text
        );
        let d = unified_diff("new.txt", "", "a\nb\n");
        assert!(d.text.ends_with("@@ -0,0 +1,2 @@\n+a\n+b\n"), "{}", d.text);
        assert_eq!(unified_diff("x", "same\n", "same\n").additions, 0);
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let before: String = (1..=30).map(|i| format!("{i}\n")).collect();
        let after: String = (1..=30)
            .map(|i| match i {
                2 => "two\n".to_string(),
                28 => "x\n".to_string(),
                _ => format!("{i}\n"),
            })
            .collect();
        let d = unified_diff("f", &before, &after);
        assert_eq!(d.text.matches("@@ -").count(), 2, "{}", d.text);
    }

    #[tokio::test]
    async fn edits_and_asks_with_the_relative_path() {
        let p = Project::new();
        let path = p.file("src/lib.rs", "fn a() {}\nfn b() {}\n");
        let out = EditTool
            .execute(
                json!({"filePath": "src/lib.rs", "oldString": "fn b", "newString": "fn c"}),
                &p.ctx(),
            )
            .await
            .unwrap();
        assert_eq!(out.output, "Edit applied successfully.");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "fn a() {}\nfn c() {}\n"
        );
        assert_eq!(out.metadata["filediff"]["additions"], 1);
        let asks = p.asks();
        assert_eq!(asks[0].permission, "edit");
        assert_eq!(asks[0].patterns, vec!["src/lib.rs"]);
        assert_eq!(asks[0].always, vec!["*"]);
        assert!(
            asks[0].metadata["diff"]
                .as_str()
                .unwrap()
                .contains("-fn b() {}")
        );
    }

    #[tokio::test]
    async fn edit_errors() {
        let p = Project::new();
        p.file("a.txt", "x x\n");
        let ctx = p.ctx();
        let run = |args: Value| EditTool.execute(args, &ctx);
        let err = run(json!({"filePath": "a.txt", "oldString": "x", "newString": "x"}))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "oldString and newString must be different");
        let err = run(json!({"filePath": "a.txt", "oldString": "x", "newString": "y"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("Found 2 matches for oldString in a.txt") && err.contains("replaceAll"),
            "{err}"
        );
        let err = run(json!({"filePath": "a.txt", "oldString": "zz", "newString": "y"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("oldString not found in a.txt"), "{err}");
        let err = run(json!({"filePath": "b.txt", "oldString": "zz", "newString": "y"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("File ") && err.ends_with("b.txt not found"),
            "{err}"
        );
        let err = run(json!({"filePath": "a.txt", "oldString": "", "newString": "y"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("already has content"), "{err}");
        run(json!({"filePath": "new/c.txt", "oldString": "", "newString": "hi\n"}))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(p.root.join("new/c.txt")).unwrap(),
            "hi\n"
        );
        // Nothing was written by the failed calls.
        assert_eq!(
            std::fs::read_to_string(p.root.join("a.txt")).unwrap(),
            "x x\n"
        );
    }
}
