//! Paths in tool arguments: resolving them against the session directory, showing them relative
//! to the project, and asking `external_directory` before a tool touches anything outside it.
//!
//! Everything here is lexical: `..` and `.` are folded without touching the file system, so a
//! path that does not exist yet (a file about to be written) is handled like any other. Symbolic
//! links are not followed.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use super::{ToolContext, ToolError};
use crate::permission::PermissionAsk;

/// Whether a path names a file (its parent directory is asked about) or a directory (asked
/// about itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A file: `external_directory` is asked for `<its parent>/*`.
    File,
    /// A directory: `external_directory` is asked for `<it>/*`.
    Directory,
}

/// `input` made absolute against `directory` (when relative) and normalized lexically.
pub fn resolve(directory: &Path, input: &str) -> PathBuf {
    let path = Path::new(input);
    if path.is_absolute() {
        normalize(path)
    } else {
        normalize(&directory.join(path))
    }
}

/// Folds `.` and `..` components without touching the file system (`/a/./b/../c` → `/a/c`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `..` at the root stays at the root.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether `path` lies outside both the project root and the session directory.
pub fn is_external(ctx: &ToolContext, path: &Path) -> bool {
    let path = normalize(path);
    !(path.starts_with(normalize(&ctx.project_root)) || path.starts_with(normalize(&ctx.directory)))
}

/// `path` relative to the project root, with `..` steps when it lies outside (like Node's
/// `path.relative`); the pattern `edit` permissions are asked with.
pub fn relative_to_project(ctx: &ToolContext, path: &Path) -> String {
    relative(&normalize(&ctx.project_root), &normalize(path))
}

/// A short title for `path`: relative to the project, `.` for the project root itself.
pub fn display_title(ctx: &ToolContext, path: &Path) -> String {
    match relative_to_project(ctx, path) {
        rel if rel.is_empty() => ".".into(),
        rel => rel,
    }
}

/// `to` relative to `from`, both absolute and normalized.
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for component in &to[common..] {
        out.push(component.as_os_str());
    }
    out.display().to_string()
}

/// The `external_directory` pattern for `path`: `<dir>/*`, where `dir` is the path itself for
/// a directory and its parent for a file.
pub fn external_glob(path: &Path, kind: PathKind) -> String {
    let dir = match kind {
        PathKind::Directory => path,
        PathKind::File => path.parent().unwrap_or(path),
    };
    let dir = dir.display().to_string();
    format!("{}/*", dir.trim_end_matches('/'))
}

/// Asks `external_directory` with pattern and always `<dir>/*` when `path` lies outside the
/// project and the session directory; does nothing otherwise.
///
/// Tool output files under `<data_dir>/tool-output/` are asked about too: the default rules
/// allow them, and the rules decide.
pub async fn ask_external_directory(
    ctx: &ToolContext,
    path: &Path,
    kind: PathKind,
) -> Result<(), ToolError> {
    if !is_external(ctx, path) {
        return Ok(());
    }
    let glob = external_glob(path, kind);
    let parent = glob.trim_end_matches("/*").to_string();
    let mut metadata = Map::new();
    metadata.insert("filepath".into(), Value::String(path.display().to_string()));
    metadata.insert(
        "parentDir".into(),
        Value::String(if parent.is_empty() {
            "/".into()
        } else {
            parent
        }),
    );
    ctx.ask(PermissionAsk {
        permission: "external_directory".into(),
        patterns: vec![glob.clone()],
        always: vec![glob],
        metadata,
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_joins_relative_paths_and_folds_dots() {
        let dir = Path::new("/srv/proj/sub");
        assert_eq!(resolve(dir, "a.txt"), PathBuf::from("/srv/proj/sub/a.txt"));
        assert_eq!(resolve(dir, "../b/./c"), PathBuf::from("/srv/proj/b/c"));
        assert_eq!(resolve(dir, "/etc/../tmp/x"), PathBuf::from("/tmp/x"));
        assert_eq!(resolve(dir, "/../.."), PathBuf::from("/"));
        assert_eq!(
            normalize(Path::new("../a/../../b")),
            PathBuf::from("../../b")
        );
    }

    #[test]
    fn relative_paths_step_out_with_dots() {
        let root = Path::new("/srv/proj");
        assert_eq!(relative(root, Path::new("/srv/proj/src/a.rs")), "src/a.rs");
        assert_eq!(relative(root, Path::new("/srv/other/x")), "../other/x");
        assert_eq!(relative(root, Path::new("/srv/proj")), "");
    }

    #[test]
    fn external_glob_uses_the_parent_of_files() {
        assert_eq!(
            external_glob(Path::new("/etc/passwd"), PathKind::File),
            "/etc/*"
        );
        assert_eq!(
            external_glob(Path::new("/etc"), PathKind::Directory),
            "/etc/*"
        );
        assert_eq!(external_glob(Path::new("/x"), PathKind::File), "/*");
    }
}
