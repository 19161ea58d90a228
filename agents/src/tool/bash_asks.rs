//! The permission asks for running a bash command line: `external_directory` for the paths it
//! names outside the project, `read` for the paths the read rules guard (`.env`…), then `bash`
//! for the commands it runs. Used by the bash tool and by `` !`cmd` `` in command templates.
//!
//! The commands and the words that may name files come from [`crate::permission::bash`]; here
//! those words are placed on the file system: redirection targets always count, arguments when
//! they are absolute, start with `~`, contain a `/` or exist in the working directory (a
//! literal `cd` moves it for the rest of the line). Each is resolved through symbolic links
//! with [`paths::real`] before it is checked, so a link cannot carry a path out of the project
//! or hide a secret file. Words with expansions are left alone (nothing can be known of them
//! before running); a relative path after a `cd` to an unknown directory cannot be placed, and
//! makes the `bash` ask a question.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::paths::{self, PathKind};
use crate::permission::bash::{self, PathRole};
use crate::permission::{Action, PermissionAsk, Rule, evaluate};

/// Where a command line runs, and the rules its paths are checked with.
#[derive(Debug, Clone, Copy)]
pub struct BashScope<'a> {
    /// The working directory the line starts in.
    pub directory: &'a Path,
    /// The project root; paths outside it and `directory` ask `external_directory`.
    pub project_root: &'a Path,
    /// The user's home directory, for `~`.
    pub home: Option<&'a Path>,
    /// The rules whose `read` entries decide which paths are secret (the agent's rules).
    pub rules: &'a [Rule],
}

/// Device files a command may name without leaving the project (`2>/dev/null`).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];

/// The asks for running `command` in `scope`, in the order to ask them: `external_directory`
/// (when a path lies outside), `read` (when the read rules do not simply allow a path), and
/// `bash`, whose metadata starts from `metadata`.
pub fn bash_asks(
    command: &str,
    scope: &BashScope<'_>,
    mut metadata: Map<String, Value>,
) -> Vec<PermissionAsk> {
    let analysis = bash::analyze(command);
    let placed = place(&analysis.paths, scope);
    let mut asks = Vec::new();
    if !placed.external.is_empty() {
        asks.push(PermissionAsk {
            permission: "external_directory".into(),
            patterns: placed.external.clone(),
            always: placed.external,
            force_ask: false,
            metadata: Map::new(),
        });
    }
    if !placed.secret.is_empty() {
        asks.push(PermissionAsk {
            permission: "read".into(),
            patterns: placed.secret,
            always: vec!["*".into()],
            force_ask: false,
            metadata: Map::new(),
        });
    }
    let unreadable: Vec<String> = analysis
        .parts
        .iter()
        .filter_map(|p| p.unreadable.as_ref().map(ToString::to_string))
        .chain(placed.unplaced.iter().map(|w| {
            format!("the path {w:?} is relative to a directory only known when the line runs")
        }))
        .collect();
    if !unreadable.is_empty() {
        metadata.insert("unreadable".into(), json!(unreadable));
    }
    asks.push(PermissionAsk {
        permission: "bash".into(),
        patterns: analysis.patterns(command),
        always: analysis.always(command),
        force_ask: !unreadable.is_empty(),
        metadata,
    });
    asks
}

/// The paths of a line, placed and sorted by what they ask.
#[derive(Debug, Default, PartialEq)]
struct Placed {
    /// `external_directory` patterns (`<dir>/*`), each once.
    external: Vec<String>,
    /// Real paths the read rules ask about or deny, each once.
    secret: Vec<String>,
    /// Relative path words after a `cd` to an unknown directory.
    unplaced: Vec<String>,
}

fn place(words: &[bash::PathWord], scope: &BashScope<'_>) -> Placed {
    let mut placed = Placed::default();
    let inside = [
        scope.project_root.to_path_buf(),
        paths::real(scope.project_root),
        scope.directory.to_path_buf(),
        paths::real(scope.directory),
    ];
    let mut cwd = Some(paths::real(scope.directory));
    for path_word in words {
        let Some(word) = path_word.word.as_deref() else {
            cwd = None;
            continue;
        };
        let role = path_word.role;
        let located = match locate(word, cwd.as_deref(), scope.home) {
            Located::Path(path) => path,
            Located::Unknown => {
                if role == PathRole::Directory {
                    cwd = None;
                }
                continue;
            }
            Located::Unplaced => {
                if role == PathRole::Directory {
                    cwd = None;
                }
                if role != PathRole::Argument || word.starts_with('.') || word.contains('/') {
                    push_unique(&mut placed.unplaced, word.to_string());
                }
                continue;
            }
        };
        let named = role != PathRole::Argument
            || word.starts_with(['/', '~'])
            || word.contains('/')
            || std::fs::symlink_metadata(&located).is_ok();
        if !named || DEVICES.contains(&located.to_string_lossy().as_ref()) {
            continue;
        }
        let real = paths::real(&located);
        let directory = role == PathRole::Directory || real.is_dir();
        if !inside.iter().any(|root| real.starts_with(root)) {
            let kind = if directory {
                PathKind::Directory
            } else {
                PathKind::File
            };
            push_unique(&mut placed.external, paths::external_glob(&real, kind));
        }
        if !directory {
            let shown = real.display().to_string();
            if evaluate("read", &shown, &[scope.rules]).action != Action::Allow {
                push_unique(&mut placed.secret, shown);
            }
        }
        if role == PathRole::Directory {
            cwd = Some(real);
        }
    }
    placed
}

/// Where a word points.
enum Located {
    /// This path (absolute, normalized, not yet resolved through links).
    Path(PathBuf),
    /// Nowhere knowable (`~user`, `~` without a known home).
    Unknown,
    /// A relative path, but the working directory is unknown.
    Unplaced,
}

fn locate(word: &str, cwd: Option<&Path>, home: Option<&Path>) -> Located {
    if word == "~" || word.starts_with("~/") {
        return match home {
            Some(home) => Located::Path(paths::resolve(home, word.trim_start_matches(['~', '/']))),
            None => Located::Unknown,
        };
    }
    if word.starts_with('~') {
        return Located::Unknown;
    }
    if Path::new(word).is_absolute() {
        return Located::Path(paths::normalize(Path::new(word)));
    }
    match cwd {
        Some(cwd) => Located::Path(paths::resolve(cwd, word)),
        None => Located::Unplaced,
    }
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

#[cfg(test)]
mod tests;
