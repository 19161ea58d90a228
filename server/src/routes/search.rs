//! `GET /find?pattern=`: lines of the project's files matching a regular expression, in
//! ripgrep's JSON match shape as OpenCode answers them. Ignored (`.gitignore`, `.ignore`),
//! hidden and binary files are skipped.

use std::path::Path;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use regex::Regex;
use serde::{Deserialize, Serialize};
use taskforce_agents::tool::looks_binary;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::check_directory;

/// The most matching lines one search answers.
const MAX_MATCHES: usize = 100;
/// The largest file searched, in bytes.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// Query of `GET /find`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FindTextQuery {
    /// A regular expression (Rust `regex` syntax, as ripgrep's).
    pattern: String,
    /// The project directory (must be the served one).
    directory: Option<String>,
}

/// Text, as ripgrep wraps it.
#[derive(Debug, Serialize, utoipa::ToSchema, PartialEq)]
pub struct Text {
    /// The text.
    pub text: String,
}

/// One matching line.
#[derive(Debug, Serialize, utoipa::ToSchema, PartialEq)]
pub struct TextMatch {
    /// The file, relative to the project.
    pub path: Text,
    /// The line, with its line ending.
    pub lines: Text,
    /// Its number, from 1.
    pub line_number: u64,
    /// The byte offset of the line's start in the file.
    pub absolute_offset: u64,
    /// Where in the line the pattern matched.
    pub submatches: Vec<Submatch>,
}

/// Where in a line the pattern matched (byte offsets in the line).
#[derive(Debug, Serialize, utoipa::ToSchema, PartialEq)]
pub struct Submatch {
    /// The matched text.
    #[serde(rename = "match")]
    pub matched: Text,
    /// Its first byte.
    pub start: u64,
    /// The byte after its last.
    pub end: u64,
}

/// `GET /find`: lines matching `pattern`, file by file in path order.
#[utoipa::path(
    get,
    path = "/find",
    operation_id = "find.text",
    summary = "Lines of the project's files matching a regular expression",
    params(FindTextQuery),
    responses((status = 200, body = Vec<TextMatch>), (status = 400, description = "Bad request: a bad pattern or field", body = ErrorBody))
)]
pub async fn text(
    State(state): State<AppState>,
    Query(q): Query<FindTextQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<TextMatch>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    if q.pattern.is_empty() {
        return Err(ApiError::bad_request("pattern: must not be empty"));
    }
    let regex = Regex::new(&q.pattern)
        .map_err(|e| ApiError::bad_request(format!("pattern: not a regular expression: {e}")))?;
    let root = state.directory.clone();
    let found = tokio::task::spawn_blocking(move || search(&root, &regex, MAX_MATCHES))
        .await
        .map_err(|e| ApiError::unknown(format!("text search failed: {e}")))?;
    Ok(Json(found))
}

/// At most `limit` lines matching `regex` in the files below `root`.
fn search(root: &Path, regex: &Regex, limit: usize) -> Vec<TextMatch> {
    let mut files: Vec<_> = ignore::WalkBuilder::new(root)
        .hidden(true)
        .require_git(false)
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter(|e| e.metadata().is_ok_and(|m| m.len() <= MAX_FILE))
        .map(|e| e.into_path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        if looks_binary(&bytes[..bytes.len().min(8192)]) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let mut offset = 0u64;
        for (index, line) in text.split_inclusive('\n').enumerate() {
            let body = line.strip_suffix('\n').unwrap_or(line);
            let body = body.strip_suffix('\r').unwrap_or(body);
            let submatches: Vec<Submatch> = regex
                .find_iter(body)
                .filter(|m| !m.as_str().is_empty())
                .map(|m| Submatch {
                    matched: Text {
                        text: m.as_str().to_string(),
                    },
                    start: m.start() as u64,
                    end: m.end() as u64,
                })
                .collect();
            if !submatches.is_empty() {
                out.push(TextMatch {
                    path: Text {
                        text: shown.clone(),
                    },
                    lines: Text {
                        text: line.to_string(),
                    },
                    line_number: index as u64 + 1,
                    absolute_offset: offset,
                    submatches,
                });
                if out.len() >= limit {
                    return out;
                }
            }
            offset += line.len() as u64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_carry_the_line_its_offset_and_where_the_pattern_matched() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn one() {}\nlet x = one();\n").unwrap();
        std::fs::write(dir.path().join("b.txt"), "nothing here\n").unwrap();
        std::fs::write(dir.path().join("bin.dat"), b"one\0two").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "skip/\n").unwrap();
        std::fs::create_dir(dir.path().join("skip")).unwrap();
        std::fs::write(dir.path().join("skip/c.rs"), "one\n").unwrap();
        let found = search(dir.path(), &Regex::new("on[e]").unwrap(), 10);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].path.text, "src/a.rs");
        assert_eq!(found[0].lines.text, "fn one() {}\n");
        assert_eq!(found[0].line_number, 1);
        assert_eq!(found[0].absolute_offset, 0);
        assert_eq!(
            found[0].submatches,
            [Submatch {
                matched: Text { text: "one".into() },
                start: 3,
                end: 6
            }]
        );
        assert_eq!(found[1].line_number, 2);
        assert_eq!(found[1].absolute_offset, 12);
        assert_eq!(found[1].submatches[0].start, 8);
        assert_eq!(
            search(dir.path(), &Regex::new("on[e]").unwrap(), 1).len(),
            1
        );
    }
}
