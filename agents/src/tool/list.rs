//! `list {path?, ignore?}`: a tree of the files below a directory, honouring `.gitignore` and
//! skipping common build and dependency folders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ignore::WalkBuilder;
use ignore::overrides::{Override, OverrideBuilder};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access::{Access, ReadGate, Skipped};
use super::paths::{self, PathKind};
use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::permission::PermissionAsk;

const ID: &str = "list";

/// The most files a listing shows.
pub(crate) const LIMIT: usize = 100;

/// Folders never listed: dependencies, build output, caches, virtual environments.
pub(crate) const IGNORED_DIRS: &[&str] = &[
    "node_modules",
    "__pycache__",
    ".git",
    "dist",
    "build",
    "target",
    "vendor",
    "bin",
    "obj",
    ".idea",
    ".vscode",
    ".zig-cache",
    "zig-out",
    ".coverage",
    "coverage",
    "tmp",
    "temp",
    ".cache",
    "cache",
    "logs",
    ".venv",
    "venv",
    "env",
];

/// The list tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListTool;

#[derive(Debug, Deserialize)]
struct Args {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    ignore: Option<Vec<String>>,
}

/// A walk below `root` like ripgrep's file listing: hidden files included, `.gitignore` (and
/// `.ignore`) honoured even outside a git repository, `.git` skipped, entries sorted by name.
pub(crate) fn walker(root: &Path, overrides: Override) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(false)
        .overrides(overrides)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// Overrides from gitignore-style globs (`!glob` ignores, `glob` selects) relative to `root`.
pub(crate) fn overrides(root: &Path, globs: &[String]) -> Result<Override, ToolError> {
    let mut builder = OverrideBuilder::new(root);
    for glob in globs {
        builder
            .add(glob)
            .map_err(|e| ToolError::Failed(format!("Invalid glob pattern {glob:?}: {e}")))?;
    }
    builder
        .build()
        .map_err(|e| ToolError::Failed(format!("Invalid glob patterns: {e}")))
}

#[async_trait]
impl Tool for ListTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/list.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The directory to list (absolute, or relative to the working directory; defaults to the working directory)"},
                "ignore": {"type": "array", "items": {"type": "string"}, "description": "Glob patterns of entries to leave out"}
            }
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let search = paths::resolve(&ctx.directory, args.path.as_deref().unwrap_or("."));
        paths::ask_external_directory(ctx, &search, PathKind::Directory).await?;
        let mut ask_metadata = Map::new();
        ask_metadata.insert("path".into(), Value::String(search.display().to_string()));
        ctx.ask(PermissionAsk {
            permission: "list".into(),
            patterns: vec![search.display().to_string()],
            always: vec!["*".into()],
            force_ask: false,
            metadata: ask_metadata,
        })
        .await?;

        let globs = ignore_globs(&args.ignore.unwrap_or_default());
        let root = search.clone();
        let gate = ReadGate::new(ctx, &search);
        let (files, truncated, skipped) =
            tokio::task::spawn_blocking(move || list_files(&root, &globs, Some(&gate)))
                .await
                .map_err(|e| ToolError::Failed(format!("listing failed: {e}")))??;

        let output = render_listing(&search, &files, truncated);
        let mut metadata = Map::new();
        metadata.insert("count".into(), json!(files.len()));
        metadata.insert("truncated".into(), Value::Bool(truncated));
        skipped.metadata(&mut metadata);
        Ok(ToolOutput {
            title: paths::display_title(ctx, &search),
            output: skipped.appended_to(output),
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }

    fn only_reads(&self) -> bool {
        true
    }
}

impl ListTool {
    /// The tool's output for `dir` with no extra ignores, without permission asks, for a
    /// directory attached to a prompt. Blocking.
    pub(crate) fn list_for_prompt(dir: &Path) -> Result<String, String> {
        let (files, truncated, _) =
            list_files(dir, &ignore_globs(&[]), None).map_err(|e| e.to_string())?;
        Ok(render_listing(dir, &files, truncated))
    }
}

/// The override globs leaving out [`IGNORED_DIRS`] and the model's `ignore` patterns.
fn ignore_globs(ignore: &[String]) -> Vec<String> {
    let mut globs: Vec<String> = IGNORED_DIRS.iter().map(|d| format!("!{d}/")).collect();
    globs.extend(ignore.iter().map(|g| format!("!{g}")));
    globs
}

/// The tool's output: the listed folder, its tree, and a note when the listing was capped.
fn render_listing(search: &Path, files: &[PathBuf], truncated: bool) -> String {
    let mut output = format!("{}/\n{}", search.display(), render(files));
    if truncated {
        output.push_str(&format!(
            "\n(Showing the first {LIMIT} files. Use a more specific path, or the glob tool, to see more.)\n"
        ));
    }
    output
}

/// Up to [`LIMIT`] files below `root` (relative to it), whether there were more, and the files
/// left out because `gate` finds that the read rules deny them (links judged by their target).
fn list_files(
    root: &Path,
    globs: &[String],
    gate: Option<&ReadGate>,
) -> Result<(Vec<PathBuf>, bool, Skipped), ToolError> {
    match std::fs::metadata(root) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ToolError::Failed(format!(
                "Not a directory: {}. Use the read tool for files.",
                root.display()
            )));
        }
        Err(_) => {
            return Err(ToolError::Failed(format!(
                "Directory not found: {}",
                root.display()
            )));
        }
    }
    let overrides = overrides(root, globs)?;
    let mut files = Vec::new();
    let mut skipped = Skipped::default();
    for entry in walker(root, overrides).build().flatten() {
        let Some(kind) = entry.file_type() else {
            continue;
        };
        if !(kind.is_file() || kind.is_symlink()) {
            continue;
        }
        if let Some(gate) = gate {
            let real = gate.real_of(entry.path(), kind.is_symlink());
            if gate.access(entry.path(), &real) == Access::Denied {
                skipped.count(Access::Denied);
                continue;
            }
        }
        if files.len() >= LIMIT {
            return Ok((files, true, skipped));
        }
        if let Ok(rel) = entry.path().strip_prefix(root) {
            files.push(rel.to_path_buf());
        }
    }
    Ok((files, false, skipped))
}

/// The indented tree of `files` (paths relative to the listed folder): folders first, each
/// level sorted by name, two spaces per level.
fn render(files: &[PathBuf]) -> String {
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut by_dir: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for file in files {
        let parent = file.parent().unwrap_or(Path::new("")).to_path_buf();
        for ancestor in parent.ancestors() {
            if !ancestor.as_os_str().is_empty() {
                dirs.insert(ancestor.to_path_buf());
            }
        }
        if let Some(name) = file.file_name() {
            by_dir
                .entry(parent)
                .or_default()
                .push(name.to_string_lossy().into_owned());
        }
    }
    let mut out = String::new();
    render_dir(Path::new(""), 0, &dirs, &by_dir, &mut out);
    out
}

fn render_dir(
    dir: &Path,
    depth: usize,
    dirs: &BTreeSet<PathBuf>,
    by_dir: &BTreeMap<PathBuf, Vec<String>>,
    out: &mut String,
) {
    if depth > 0 {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        out.push_str(&format!("{}{name}/\n", "  ".repeat(depth)));
    }
    for child in dirs.iter().filter(|d| d.parent() == Some(dir)) {
        render_dir(child, depth + 1, dirs, by_dir, out);
    }
    if let Some(names) = by_dir.get(dir) {
        let mut names = names.clone();
        names.sort();
        for name in names {
            out.push_str(&format!("{}{name}\n", "  ".repeat(depth + 1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    #[tokio::test]
    async fn lists_a_tree_and_skips_ignored_and_junk() {
        let p = Project::new();
        p.file(".gitignore", "secret/\n*.log\n");
        p.file("src/main.rs", "");
        p.file("src/tool/mod.rs", "");
        p.file("README.md", "");
        p.file("app.log", "");
        p.file("secret/key", "");
        p.file("node_modules/x/index.js", "");
        p.file("target/debug/bin", "");
        p.file("docs/a.md", "");
        let out = ListTool
            .execute(json!({"ignore": ["docs/"]}), &p.ctx())
            .await
            .unwrap();
        let expected = format!(
            "{}/\n  src/\n    tool/\n      mod.rs\n    main.rs\n  .gitignore\n  README.md\n",
            p.root.display()
        );
        assert_eq!(out.output, expected);
        assert_eq!(out.metadata["count"], 4);
        let asks = p.asks();
        assert_eq!(asks[0].permission, "list");
        assert_eq!(asks[0].patterns, vec![p.root.display().to_string()]);
    }

    #[tokio::test]
    async fn caps_the_listing() {
        let p = Project::new();
        for i in 0..(LIMIT + 5) {
            p.file(&format!("f{i:03}.txt"), "");
        }
        let out = ListTool.execute(json!({}), &p.ctx()).await.unwrap();
        assert_eq!(out.metadata["count"], LIMIT);
        assert_eq!(out.metadata["truncated"], true);
        assert!(out.output.contains("(Showing the first 100 files."));
    }
}
