//! What the permission rules let a tool do with a path, judged on both its forms (as given and
//! with links resolved) so that the strictest wins: the `read` and `edit` asks, and the gate
//! through which search tools pass each file they would show.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::paths::{self, Boundary, PathKind};
use super::{ToolContext, ToolError};
use crate::permission::{AskDecision, PermissionAsk};

/// `patterns` without duplicates, ordered by what the session's rules say about each alone:
/// denied first, then asked, then allowed (ties keep their order). An ask stops at its first
/// pattern that is not allowed, so this order lets the strictest of them decide.
pub fn strictest_first(ctx: &ToolContext, permission: &str, patterns: Vec<String>) -> Vec<String> {
    let mut unique: Vec<String> = Vec::with_capacity(patterns.len());
    for pattern in patterns {
        if !unique.contains(&pattern) {
            unique.push(pattern);
        }
    }
    if unique.len() < 2 {
        return unique;
    }
    let mut ranked: Vec<(Access, String)> = unique
        .into_iter()
        .map(|pattern| (check(ctx, permission, &pattern), pattern))
        .collect();
    ranked.sort_by_key(|(access, _)| *access);
    ranked.into_iter().map(|(_, pattern)| pattern).collect()
}

/// The path as given (folded lexically) and its real form `real`, as patterns, without
/// duplicates.
fn both_forms(path: &Path, real: &Path) -> Vec<String> {
    let given = paths::normalize(path).display().to_string();
    let real = real.display().to_string();
    if given == real {
        vec![given]
    } else {
        vec![given, real]
    }
}

/// Asks `read` for `path` as given and in its real form `real` ([`paths::real`], resolved by
/// the caller once for all its asks), the strictest first; always `*`.
pub async fn ask_read(ctx: &ToolContext, path: &Path, real: &Path) -> Result<(), ToolError> {
    ctx.ask(PermissionAsk {
        permission: "read".into(),
        patterns: strictest_first(ctx, "read", both_forms(path, real)),
        always: vec!["*".into()],
        force_ask: false,
        metadata: Map::new(),
    })
    .await
}

/// Asks `edit` for `path` relative to the project, as given and in real form, the strictest
/// first; always `*`.
pub async fn ask_edit(
    ctx: &ToolContext,
    path: &Path,
    metadata: Map<String, Value>,
) -> Result<(), ToolError> {
    let patterns = vec![
        paths::relative_to_project(ctx, path),
        paths::real_relative_to_project(ctx, path),
    ];
    ctx.ask(PermissionAsk {
        permission: "edit".into(),
        patterns: strictest_first(ctx, "edit", patterns),
        always: vec!["*".into()],
        force_ask: false,
        metadata,
    })
    .await
}

/// What the rules alone say a tool may do, ordered from the most to the least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// A rule refuses it.
    Denied,
    /// The user would be asked.
    Asked,
    /// Allowed without asking.
    Allowed,
}

impl From<AskDecision> for Access {
    fn from(decision: AskDecision) -> Self {
        match decision {
            AskDecision::Allow => Access::Allowed,
            AskDecision::Ask => Access::Asked,
            AskDecision::Deny(_) => Access::Denied,
        }
    }
}

/// What the session's rules say about `permission` for `pattern` alone, without asking.
fn check(ctx: &ToolContext, permission: &str, pattern: &str) -> Access {
    ctx.check(&PermissionAsk {
        permission: permission.into(),
        patterns: vec![pattern.to_string()],
        ..PermissionAsk::default()
    })
    .into()
}

/// Judges, without asking anyone, what a read of each file found by a search would meet: the
/// `read` rules on the file as found and in real form, and `external_directory` when its real
/// form lies outside the project and outside the (already allowed) search folder.
pub struct ReadGate {
    ctx: ToolContext,
    boundary: Boundary,
    /// The search folder as given, and its real form.
    search: PathBuf,
    search_real: PathBuf,
}

impl ReadGate {
    /// A gate for a search of `search` (already allowed) in `ctx`'s session.
    pub fn new(ctx: &ToolContext, search: &Path) -> ReadGate {
        ReadGate {
            ctx: ctx.clone(),
            boundary: Boundary::of(ctx),
            search: paths::normalize(search),
            search_real: paths::real(search),
        }
    }

    /// The real form of `path`, found by a walk of the search folder that does not follow
    /// links: below the folder only a link itself needs resolving.
    pub fn real_of(&self, path: &Path, is_link: bool) -> PathBuf {
        match path.strip_prefix(&self.search) {
            Ok(rel) if !is_link => self.search_real.join(rel),
            _ => paths::real(path),
        }
    }

    /// What a read of `path` (whose real form is `real`) would meet.
    pub fn access(&self, path: &Path, real: &Path) -> Access {
        let mut access = Access::Allowed;
        if !self.boundary.contains(real) && !real.starts_with(&self.search_real) {
            let glob = paths::external_glob(real, PathKind::File);
            access = check(&self.ctx, "external_directory", &glob);
        }
        let forms: &[&Path] = if path == real { &[real] } else { &[path, real] };
        for form in forms {
            if access == Access::Denied {
                break;
            }
            access = access.min(check(&self.ctx, "read", &form.display().to_string()));
        }
        access
    }
}

/// The files a search left out because of the read rules, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Files a read of which the rules deny.
    pub denied: usize,
    /// Files a read of which would ask the user first.
    pub asked: usize,
}

impl Skipped {
    /// Counts one file left out for `access` (nothing for `Allowed`).
    pub fn count(&mut self, access: Access) {
        match access {
            Access::Denied => self.denied += 1,
            Access::Asked => self.asked += 1,
            Access::Allowed => {}
        }
    }

    /// The lines telling the model what was left out and why; empty when nothing was.
    pub fn note(&self) -> String {
        let mut lines = Vec::new();
        if self.denied > 0 {
            lines.push(format!(
                "({} skipped: the read rules deny {})",
                files(self.denied),
                if self.denied == 1 { "it" } else { "them" }
            ));
        }
        if self.asked > 0 {
            lines.push(format!(
                "({} skipped: reading {} needs the user's permission; the read tool asks for it)",
                files(self.asked),
                if self.asked == 1 { "it" } else { "them" }
            ));
        }
        lines.join("\n")
    }

    /// `output` followed by a blank line and [`Skipped::note`] when anything was skipped (its
    /// trailing newlines then give way to the blank line).
    pub fn appended_to(&self, mut output: String) -> String {
        let note = self.note();
        if !note.is_empty() {
            output.truncate(output.trim_end_matches('\n').len());
            output.push_str("\n\n");
            output.push_str(&note);
        }
        output
    }

    /// The counts as tool metadata (`skipped: {denied, asked}`), when anything was skipped.
    pub fn metadata(&self, metadata: &mut Map<String, Value>) {
        if self.denied + self.asked > 0 {
            metadata.insert(
                "skipped".into(),
                serde_json::json!({"denied": self.denied, "asked": self.asked}),
            );
        }
    }
}

/// `n file` or `n files`.
fn files(n: usize) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}

#[cfg(all(test, unix))]
mod tests;
