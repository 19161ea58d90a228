//! `/find/file`: the project's files (and folders) whose path matches a query, best first, as
//! clients complete `@path` mentions. Ignored files (`.gitignore`, `.ignore`) are left out.

use std::path::Path;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Deserialize;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::{ErrorBody, Object};
use super::check_directory;

/// The most paths one search answers.
const MAX_LIMIT: usize = 200;
/// The most paths a search looks at (a huge tree is searched in part, not for ever).
const MAX_SCANNED: usize = 50_000;

/// Query of `GET /find/file`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FindFileQuery {
    /// What the path should contain (letters in order; case ignored).
    query: String,
    /// Whether folders are answered too (`"true"`, the default, or `"false"`).
    dirs: Option<String>,
    /// Only files (`"file"`) or only folders (`"directory"`); wins over `dirs`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    kind: Option<String>,
    /// At most this many (default 10, at most 200).
    limit: Option<usize>,
    /// The project directory (must be the served one).
    directory: Option<String>,
}

/// `GET /find/file`: paths relative to the project, best match first.
#[utoipa::path(
    get,
    path = "/find/file",
    operation_id = "find.files",
    summary = "Find files and folders by path",
    params(FindFileQuery),
    responses((status = 200, body = Vec<String>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn files(
    State(state): State<AppState>,
    Query(q): Query<FindFileQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<String>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let dirs = match q.dirs.as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dirs: expected \"true\" or \"false\", got {other:?}"
            )));
        }
    };
    let wanted = match q.kind.as_deref() {
        None if dirs => Wanted::Both,
        None | Some("file") => Wanted::Files,
        Some("directory") => Wanted::Dirs,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "type: expected \"file\" or \"directory\", got {other:?}"
            )));
        }
    };
    let limit = q.limit.unwrap_or(10).clamp(1, MAX_LIMIT);
    let root = state.directory.clone();
    let found = tokio::task::spawn_blocking(move || search(&root, &q.query, wanted, limit))
        .await
        .map_err(|e| ApiError::unknown(format!("file search failed: {e}")))?;
    Ok(Json(found))
}

/// Which entries a file search answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Files,
    Dirs,
    Both,
}

/// Query of `GET /find/symbol`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FindSymbolQuery {
    /// The symbol name looked for.
    #[allow(dead_code)]
    query: Option<String>,
    /// The project directory (must be the served one).
    directory: Option<String>,
}

/// `GET /find/symbol`: workspace symbols; taskforce runs no language server, so none.
#[utoipa::path(
    get,
    path = "/find/symbol",
    operation_id = "find.symbols",
    summary = "Workspace symbols (none: taskforce runs no language server)",
    params(FindSymbolQuery),
    responses((status = 200, body = Vec<Object>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn symbols(
    State(state): State<AppState>,
    Query(q): Query<FindSymbolQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<serde_json::Value>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(Vec::new()))
}

/// How well `path` matches `needle` (lower is better), or `None`.
fn score(path: &str, needle: &str) -> Option<(u8, usize)> {
    let lower = path.to_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    if needle.is_empty() {
        return Some((3, path.len()));
    }
    if name.starts_with(needle) {
        return Some((0, path.len()));
    }
    if lower.contains(needle) {
        return Some((1, path.len()));
    }
    let mut chars = lower.chars();
    needle
        .chars()
        .all(|c| chars.any(|p| p == c))
        .then_some((2, path.len()))
}

/// The best `limit` paths under `root` matching `query`.
fn search(root: &Path, query: &str, wanted: Wanted, limit: usize) -> Vec<String> {
    let needle = query.trim().trim_start_matches('@').to_lowercase();
    let mut scored: Vec<((u8, usize), String)> = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .require_git(false)
        .build();
    for entry in walker.flatten().take(MAX_SCANNED) {
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let keep = match wanted {
            Wanted::Both => true,
            Wanted::Files => !is_dir,
            Wanted::Dirs => is_dir,
        };
        if !keep {
            continue;
        }
        let mut text = relative.to_string_lossy().replace('\\', "/");
        if is_dir {
            text.push('/');
        }
        if let Some(s) = score(&text, &needle) {
            scored.push((s, text));
        }
    }
    scored.sort();
    scored.into_iter().take(limit).map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_start_with_the_query_come_first_then_paths_that_contain_it() {
        let dir = tempfile::tempdir().unwrap();
        for file in [
            "src/main.rs",
            "src/domain.rs",
            "docs/maintenance.md",
            "target/x/main.o",
        ] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        let found = search(dir.path(), "main", Wanted::Files, 10);
        assert_eq!(
            found,
            ["src/main.rs", "docs/maintenance.md", "src/domain.rs"]
        );
        let with_dirs = search(dir.path(), "sr", Wanted::Both, 10);
        assert_eq!(with_dirs[0], "src/");
        assert_eq!(search(dir.path(), "sr", Wanted::Dirs, 10), ["src/"]);
        assert_eq!(search(dir.path(), "mrs", Wanted::Files, 1), ["src/main.rs"]);
        assert!(search(dir.path(), "zzz", Wanted::Both, 10).is_empty());
    }
}
