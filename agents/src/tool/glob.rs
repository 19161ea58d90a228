//! `glob {pattern, path?}`: files matching a glob, newest first, honouring `.gitignore`.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use ignore::overrides::Override;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access::{Access, ReadGate, Skipped};
use super::list::{overrides, walker};
use super::paths::{self, PathKind};
use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::permission::PermissionAsk;

const ID: &str = "glob";

/// The most files a glob returns.
pub(crate) const LIMIT: usize = 100;

/// The note after capped results.
pub(crate) const TRUNCATED_NOTE: &str =
    "(Results are truncated. Consider using a more specific path or pattern.)";

/// The glob tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

#[async_trait]
impl Tool for GlobTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/glob.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob pattern to match files against, like \"**/*.rs\" or \"src/**/*.{ts,tsx}\""},
                "path": {"type": "string", "description": "The directory to search in (defaults to the working directory)"}
            },
            "required": ["pattern"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let search = paths::resolve(&ctx.directory, args.path.as_deref().unwrap_or("."));
        paths::ask_external_directory(ctx, &search, PathKind::Directory).await?;
        let mut ask_metadata = Map::new();
        ask_metadata.insert("pattern".into(), Value::String(args.pattern.clone()));
        ask_metadata.insert("path".into(), Value::String(search.display().to_string()));
        ctx.ask(PermissionAsk {
            permission: "glob".into(),
            patterns: vec![args.pattern.clone()],
            always: vec!["*".into()],
            force_ask: false,
            metadata: ask_metadata,
        })
        .await?;

        // An absolute pattern below the search folder is made relative to it.
        let pattern = Path::new(&args.pattern)
            .strip_prefix(&search)
            .map(|p| p.display().to_string())
            .unwrap_or(args.pattern);
        let root = search.clone();
        let gate = ReadGate::new(ctx, &search);
        let (files, truncated, skipped) =
            tokio::task::spawn_blocking(move || find(&root, &pattern, &gate))
                .await
                .map_err(|e| ToolError::Failed(format!("glob failed: {e}")))??;

        let output = if files.is_empty() {
            "No files found".to_string()
        } else {
            let mut out = files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join("\n");
            if truncated {
                out.push_str("\n\n");
                out.push_str(TRUNCATED_NOTE);
            }
            out
        };
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

/// The files below `root` matching `pattern` (gitignore-style glob: without a `/` it matches a
/// name at any depth), newest first, at most [`LIMIT`], whether there were more, and the
/// matching files left out because the read rules deny them.
fn find(
    root: &Path,
    pattern: &str,
    gate: &ReadGate,
) -> Result<(Vec<PathBuf>, bool, Skipped), ToolError> {
    if !root.is_dir() {
        return Err(ToolError::Failed(format!(
            "Directory not found: {}",
            root.display()
        )));
    }
    let matcher = overrides(root, &[pattern.to_string()])?;
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut skipped = Skipped::default();
    for entry in walker(root, Override::empty()).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if !matcher.matched(entry.path(), false).is_whitelist() {
            continue;
        }
        if gate.access(entry.path(), &gate.real_of(entry.path(), false)) == Access::Denied {
            skipped.count(Access::Denied);
            continue;
        }
        let mtime = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        found.push((mtime, entry.into_path()));
    }
    let (files, truncated) = newest_first(found, LIMIT);
    Ok((files, truncated, skipped))
}

/// Sorts by modification time, newest first (then by path), keeping at most `limit`.
pub(crate) fn newest_first(
    mut found: Vec<(SystemTime, PathBuf)>,
    limit: usize,
) -> (Vec<PathBuf>, bool) {
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let truncated = found.len() > limit;
    found.truncate(limit);
    (found.into_iter().map(|(_, p)| p).collect(), truncated)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    fn touch(path: &Path, secs_ago: u64) {
        let t = SystemTime::now() - Duration::from_secs(secs_ago);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[tokio::test]
    async fn matches_newest_first_and_honours_gitignore() {
        let p = Project::new();
        p.file(".gitignore", "gen/\n");
        touch(&p.file("src/old.rs", ""), 100);
        touch(&p.file("src/new.rs", ""), 10);
        touch(&p.file("lib.rs", ""), 50);
        p.file("gen/skip.rs", "");
        p.file("a.txt", "");
        let out = GlobTool
            .execute(json!({"pattern": "*.rs"}), &p.ctx())
            .await
            .unwrap();
        let r = |s: &str| p.root.join(s).display().to_string();
        assert_eq!(
            out.output,
            [r("src/new.rs"), r("lib.rs"), r("src/old.rs")].join("\n")
        );
        let out = GlobTool
            .execute(json!({"pattern": "src/**/*.rs"}), &p.ctx())
            .await
            .unwrap();
        assert_eq!(out.metadata["count"], 2);
        let out = GlobTool
            .execute(json!({"pattern": "*.md"}), &p.ctx())
            .await
            .unwrap();
        assert_eq!(out.output, "No files found");
        let asks = p.asks();
        assert_eq!(asks[0].permission, "glob");
        assert_eq!(asks[0].patterns, vec!["*.rs"]);
    }

    #[tokio::test]
    async fn caps_at_the_limit() {
        let p = Project::new();
        for i in 0..(LIMIT + 1) {
            p.file(&format!("f{i:03}.txt"), "");
        }
        let out = GlobTool
            .execute(json!({"pattern": "*.txt"}), &p.ctx())
            .await
            .unwrap();
        assert_eq!(out.metadata["count"], LIMIT);
        assert!(out.output.ends_with(TRUNCATED_NOTE));
    }
}
