//! `grep {pattern, path?, include?}`: lines matching a regular expression, grouped by file,
//! newest files first, honouring `.gitignore`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use ignore::overrides::Override;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access::{Access, ReadGate, Skipped};
use super::glob::TRUNCATED_NOTE;
use super::list::{overrides, walker};
use super::paths::{self, PathKind};
use super::read::looks_binary;
use super::run::parse_args;
use super::truncate::MAX_BYTES;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::permission::PermissionAsk;

const ID: &str = "grep";

/// The most matching lines shown.
pub(crate) const LIMIT: usize = 100;

/// Longer matching lines are cut and end with `...`.
const MAX_LINE_LENGTH: usize = 2000;

/// The grep tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    include: Option<String>,
}

/// The matches of one file.
struct FileMatches {
    path: PathBuf,
    mtime: SystemTime,
    /// `(line number, text)`, at most [`LIMIT`] per file.
    lines: Vec<(usize, String)>,
}

#[async_trait]
impl Tool for GrepTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/grep.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression to search file contents for"},
                "path": {"type": "string", "description": "The directory (or file) to search in (defaults to the working directory)"},
                "include": {"type": "string", "description": "A glob of the files to search, like \"*.rs\" or \"*.{ts,tsx}\""}
            },
            "required": ["pattern"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let regex = Regex::new(&args.pattern).map_err(|e| {
            ToolError::Failed(format!("Invalid regex pattern {:?}: {e}", args.pattern))
        })?;
        let search = paths::resolve(&ctx.directory, args.path.as_deref().unwrap_or("."));
        paths::ask_external_directory(ctx, &search, PathKind::Directory).await?;
        let mut ask_metadata = Map::new();
        ask_metadata.insert("pattern".into(), Value::String(args.pattern.clone()));
        ask_metadata.insert("path".into(), Value::String(search.display().to_string()));
        ask_metadata.insert("include".into(), json!(args.include));
        ctx.ask(PermissionAsk {
            permission: "grep".into(),
            patterns: vec![args.pattern.clone()],
            always: vec!["*".into()],
            force_ask: false,
            metadata: ask_metadata,
        })
        .await?;

        let root = search.clone();
        let include = args.include.clone();
        let gate = ReadGate::new(ctx, &search);
        let (mut files, total, skipped) = tokio::task::spawn_blocking(move || {
            search_files(&root, &regex, include.as_deref(), &gate)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("grep failed: {e}")))??;
        files.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));

        if total == 0 {
            let mut metadata = Map::new();
            metadata.insert("matches".into(), json!(0));
            metadata.insert("truncated".into(), Value::Bool(false));
            skipped.metadata(&mut metadata);
            return Ok(ToolOutput {
                title: args.pattern,
                output: skipped.appended_to("No files found".into()),
                metadata: metadata.into(),
                attachments: Vec::new(),
            });
        }

        let mut body = String::new();
        let mut shown = 0usize;
        'files: for file in &files {
            let header = format!("{}:\n", file.path.display());
            for (i, (number, text)) in file.lines.iter().enumerate() {
                let line = format!("  Line {number}: {text}\n");
                let extra = if i == 0 { header.len() + 1 } else { 0 };
                if shown >= LIMIT || body.len() + line.len() + extra > MAX_BYTES - 1024 {
                    break 'files;
                }
                if i == 0 {
                    if !body.is_empty() {
                        body.push('\n');
                    }
                    body.push_str(&header);
                }
                body.push_str(&line);
                shown += 1;
            }
        }
        let truncated = shown < total;
        let mut output = if truncated {
            format!("Found {total} matches (showing the first {shown})\n{body}")
        } else {
            format!("Found {total} matches\n{body}")
        };
        if truncated {
            output.push('\n');
            output.push_str(TRUNCATED_NOTE);
        }
        let mut metadata = Map::new();
        metadata.insert("matches".into(), json!(total));
        metadata.insert("truncated".into(), Value::Bool(truncated));
        skipped.metadata(&mut metadata);
        Ok(ToolOutput {
            title: args.pattern,
            output: skipped.appended_to(output.trim_end().to_string()),
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }

    fn only_reads(&self) -> bool {
        true
    }
}

/// Every file below `root` (or `root` itself when it is a file) with lines matching `regex`,
/// the total number of matching lines, and the files left unread because a read of them
/// would not be allowed outright (denied, or asked about).
fn search_files(
    root: &Path,
    regex: &Regex,
    include: Option<&str>,
    gate: &ReadGate,
) -> Result<(Vec<FileMatches>, usize, Skipped), ToolError> {
    let meta = std::fs::metadata(root)
        .map_err(|_| ToolError::Failed(format!("Path not found: {}", root.display())))?;
    let mut found = Vec::new();
    let mut total = 0;
    let mut skipped = Skipped::default();
    if meta.is_file() {
        let access = gate.access(root, &gate.real_of(root, true));
        if access != Access::Allowed {
            skipped.count(access);
        } else if let Some(m) = search_file(root, regex, &mut total) {
            found.push(m);
        }
        return Ok((found, total, skipped));
    }
    let include = match include {
        Some(glob) => Some(overrides(root, &[glob.to_string()])?),
        None => None,
    };
    for entry in walker(root, Override::empty()).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Some(include) = &include
            && !include.matched(entry.path(), false).is_whitelist()
        {
            continue;
        }
        let access = gate.access(entry.path(), &gate.real_of(entry.path(), false));
        if access != Access::Allowed {
            skipped.count(access);
            continue;
        }
        if let Some(m) = search_file(entry.path(), regex, &mut total) {
            found.push(m);
        }
    }
    Ok((found, total, skipped))
}

/// The matching lines of one text file (binary and unreadable files are skipped), adding their
/// count to `total`.
fn search_file(path: &Path, regex: &Regex, total: &mut usize) -> Option<FileMatches> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    if looks_binary(&bytes[..bytes.len().min(8192)]) {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        *total += 1;
        if lines.len() < LIMIT {
            let shown = match line.char_indices().nth(MAX_LINE_LENGTH) {
                Some((end, _)) => format!("{}...", &line[..end]),
                None => line.to_string(),
            };
            lines.push((i + 1, shown));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let mtime = file
        .metadata()
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    Some(FileMatches {
        path: path.to_path_buf(),
        mtime,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    fn age(path: &Path, secs: u64) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    }

    #[tokio::test]
    async fn groups_by_file_newest_first() {
        let p = Project::new();
        p.file(".gitignore", "*.gen.rs\n");
        let a = p.file("a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n");
        let b = p.file("src/b.rs", "fn gamma() {}\n");
        p.file("skip.gen.rs", "fn hidden() {}\n");
        p.file("notes.md", "fn in markdown\n");
        std::fs::write(p.root.join("bin.dat2"), b"fn \0 binary").unwrap();
        age(&a, 100);
        age(&b, 10);
        let out = GrepTool
            .execute(
                json!({"pattern": "fn \\w+\\(", "include": "*.rs"}),
                &p.ctx(),
            )
            .await
            .unwrap();
        assert_eq!(
            out.output,
            format!(
                "Found 3 matches\n{}:\n  Line 1: fn gamma() {{}}\n\n{}:\n  Line 1: fn alpha() {{}}\n  Line 3: fn beta() {{}}",
                b.display(),
                a.display()
            )
        );
        assert_eq!(out.metadata["matches"], 3);
        let asks = p.asks();
        assert_eq!(asks[0].permission, "grep");
        assert_eq!(asks[0].patterns, vec!["fn \\w+\\("]);
    }

    #[tokio::test]
    async fn no_match_bad_regex_and_single_file() {
        let p = Project::new();
        let f = p.file("a.txt", "hello\nworld\n");
        let ctx = p.ctx();
        let out = GrepTool
            .execute(json!({"pattern": "zzz"}), &ctx)
            .await
            .unwrap();
        assert_eq!(out.output, "No files found");
        let err = GrepTool
            .execute(json!({"pattern": "("}), &ctx)
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with("Invalid regex pattern \"(\""),
            "{err}"
        );
        let out = GrepTool
            .execute(json!({"pattern": "wor", "path": "a.txt"}), &ctx)
            .await
            .unwrap();
        assert_eq!(
            out.output,
            format!("Found 1 matches\n{}:\n  Line 2: world", f.display())
        );
    }

    #[tokio::test]
    async fn caps_matches() {
        let p = Project::new();
        p.file("a.txt", &"x\n".repeat(LIMIT + 20));
        let out = GrepTool
            .execute(json!({"pattern": "x"}), &p.ctx())
            .await
            .unwrap();
        assert!(
            out.output
                .starts_with("Found 120 matches (showing the first 100)")
        );
        assert!(out.output.ends_with(TRUNCATED_NOTE));
        assert_eq!(out.metadata["truncated"], true);
    }
}
