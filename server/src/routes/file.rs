//! `/file`, `/file/content` and `/file/status`: the project's folders listed, its files read,
//! and the files git sees changed. Paths are relative to the project; a path that leads outside
//! it (by `..`, an absolute path or a symbolic link) is refused.

use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use base64::Engine;
use serde::{Deserialize, Serialize};
use taskforce_agents::tool::looks_binary;
use taskforce_agents::tool::paths::{real, resolve};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::{DirectoryQuery, check_directory, git};

/// The largest file `/file/content` reads, in bytes.
const MAX_READ: u64 = 10 * 1024 * 1024;

/// Query of `GET /file` and `GET /file/content`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PathQuery {
    /// A path relative to the project (empty or `.`: its root).
    path: String,
    /// The project directory (must be the served one).
    directory: Option<String>,
}

/// A file or folder of a listing.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FileNode {
    /// Its name.
    pub name: String,
    /// Its path relative to the project.
    pub path: String,
    /// Its absolute path.
    pub absolute: String,
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether `.gitignore` or `.ignore` leaves it out.
    pub ignored: bool,
}

/// A file's content.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FileContent {
    /// `text`, or `binary` (then `content` is base64).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text, or the bytes in base64.
    pub content: String,
    /// `base64` for binary content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The media type of binary content, guessed from the file's extension.
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A file git sees changed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChangedFile {
    /// Its path relative to the project.
    pub path: String,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// `added`, `deleted` or `modified`.
    pub status: String,
}

/// `raw` (relative to the project) as an absolute path, after checking that it and what its
/// links lead to stay inside the project.
fn inside_project(root: &Path, raw: &str) -> Result<PathBuf, ApiError> {
    let raw = raw.trim();
    let path = resolve(root, if raw.is_empty() { "." } else { raw });
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let real_path = real(&path);
    if !path.starts_with(root) || !real_path.starts_with(&real_root) {
        return Err(ApiError::bad_request(format!(
            "path `{raw}` is outside the project ({})",
            root.display()
        )));
    }
    Ok(path)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn missing(raw: &str, e: &std::io::Error) -> ApiError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ApiError::not_found(format!(
            "path `{raw}`: no such file or folder in the project"
        ))
    } else {
        ApiError::bad_request(format!("path `{raw}`: {e}"))
    }
}

/// `GET /file`: the entries of a project folder, folders first, then by name.
#[utoipa::path(
    get,
    path = "/file",
    operation_id = "file.list",
    summary = "The entries of a project folder",
    params(PathQuery),
    responses((status = 200, body = Vec<FileNode>), (status = 400, description = "Bad request, or a path outside the project", body = ErrorBody), (status = 404, description = "No such folder", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<PathQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<FileNode>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let root = state.directory.clone();
    let dir = inside_project(&root, &q.path)?;
    let raw = q.path.clone();
    tokio::task::spawn_blocking(move || list_dir(&root, &dir, &raw))
        .await
        .map_err(|e| ApiError::unknown(format!("listing failed: {e}")))?
        .map(Json)
}

fn list_dir(root: &Path, dir: &Path, raw: &str) -> Result<Vec<FileNode>, ApiError> {
    let entries = std::fs::read_dir(dir).map_err(|e| missing(raw, &e))?;
    // What the ignore rules keep (hidden files are not ignored for that alone).
    let kept: std::collections::HashSet<PathBuf> = ignore::WalkBuilder::new(dir)
        .max_depth(Some(1))
        .hidden(false)
        .require_git(false)
        .build()
        .flatten()
        .map(|e| e.into_path())
        .collect();
    let mut nodes: Vec<FileNode> = entries
        .flatten()
        .filter(|e| e.file_name() != ".git")
        .map(|entry| {
            let path = entry.path();
            let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
            FileNode {
                name: entry.file_name().to_string_lossy().into_owned(),
                path: relative(root, &path),
                absolute: path.display().to_string(),
                kind: if is_dir { "directory" } else { "file" }.to_string(),
                ignored: !kept.contains(&path),
            }
        })
        .collect();
    nodes.sort_by(|a, b| (a.kind != "directory", &a.name).cmp(&(b.kind != "directory", &b.name)));
    Ok(nodes)
}

/// `GET /file/content`: a project file's text, or its bytes in base64 when it is binary.
#[utoipa::path(
    get,
    path = "/file/content",
    operation_id = "file.read",
    summary = "A project file's content",
    params(PathQuery),
    responses((status = 200, body = FileContent), (status = 400, description = "Bad request, a folder, or a path outside the project", body = ErrorBody), (status = 404, description = "No such file", body = ErrorBody))
)]
pub async fn content(
    State(state): State<AppState>,
    Query(q): Query<PathQuery>,
    headers: HeaderMap,
) -> Result<Json<FileContent>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let path = inside_project(&state.directory, &q.path)?;
    let raw = q.path.clone();
    tokio::task::spawn_blocking(move || read(&path, &raw))
        .await
        .map_err(|e| ApiError::unknown(format!("reading failed: {e}")))?
        .map(Json)
}

fn read(path: &Path, raw: &str) -> Result<FileContent, ApiError> {
    let meta = std::fs::metadata(path).map_err(|e| missing(raw, &e))?;
    if meta.is_dir() {
        return Err(ApiError::bad_request(format!(
            "path `{raw}` is a folder; list it with GET /file"
        )));
    }
    if meta.len() > MAX_READ {
        return Err(ApiError::bad_request(format!(
            "path `{raw}`: the file has {} bytes, more than the {MAX_READ} this route reads",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| missing(raw, &e))?;
    if !looks_binary(&bytes[..bytes.len().min(8192)])
        && let Ok(text) = String::from_utf8(bytes.clone())
    {
        return Ok(FileContent {
            kind: "text".into(),
            content: text,
            encoding: None,
            mime_type: None,
        });
    }
    Ok(FileContent {
        kind: "binary".into(),
        content: base64::engine::general_purpose::STANDARD.encode(&bytes),
        encoding: Some("base64".into()),
        mime_type: Some(mime_type(path).into()),
    })
}

/// The media type a file's extension suggests.
fn mime_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "ico" => "image/x-icon",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// `GET /file/status`: the files git sees changed (none when the project is not a repository
/// or git is not installed).
#[utoipa::path(
    get,
    path = "/file/status",
    operation_id = "file.status",
    summary = "The files git sees changed",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<ChangedFile>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn status(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<ChangedFile>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let root = state.directory.clone();
    let changed = tokio::task::spawn_blocking(move || git::changes(&root))
        .await
        .map_err(|e| ApiError::unknown(format!("git status failed: {e}")))?;
    Ok(Json(
        changed
            .into_iter()
            .map(|c| ChangedFile {
                path: c.path,
                added: c.added,
                removed: c.removed,
                status: c.change.as_str().to_string(),
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_project_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("proj");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.parent().unwrap().join("secret.txt"), "s").unwrap();
        assert_eq!(inside_project(&root, "src").unwrap(), root.join("src"));
        assert_eq!(inside_project(&root, "").unwrap(), root);
        for bad in ["../secret.txt", "/etc/passwd", "src/../../secret.txt"] {
            let error = inside_project(&root, bad).unwrap_err();
            assert_eq!(error.status, 400);
            assert!(error.message.contains(bad), "{}", error.message);
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.parent().unwrap(), root.join("up")).unwrap();
            let error = inside_project(&root, "up/secret.txt").unwrap_err();
            assert!(error.message.contains("outside the project"));
        }
    }

    #[test]
    fn binary_files_come_back_in_base64_with_their_media_type() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("a.png");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0").unwrap();
        let read_back = read(&png, "a.png").unwrap();
        assert_eq!(read_back.kind, "binary");
        assert_eq!(read_back.mime_type.as_deref(), Some("image/png"));
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(read_back.content)
                .unwrap(),
            b"\x89PNG\r\n\x1a\n\0\0"
        );
        let text = dir.path().join("a.txt");
        std::fs::write(&text, "hi\n").unwrap();
        assert_eq!(read(&text, "a.txt").unwrap().content, "hi\n");
    }
}
