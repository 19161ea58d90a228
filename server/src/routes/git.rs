//! What the server reads of the project's git repository: the branch (from `.git/HEAD`, no git
//! needed) and the changed files (`git status` and `git diff --numstat`, when git is there).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The git directory of the repository at `root`: `.git` itself, or the folder a `.git` file
/// points to (worktrees, submodules).
fn git_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    let meta = std::fs::metadata(&dot_git).ok()?;
    if meta.is_dir() {
        return Some(dot_git);
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let target = text.trim().strip_prefix("gitdir:")?.trim();
    Some(root.join(target))
}

/// Whether `root` is the top of a git repository.
pub(crate) fn is_repo(root: &Path) -> bool {
    git_dir(root).is_some()
}

/// The checked-out branch of the repository at `root`; `HEAD` when detached; none when
/// `root` is not a repository.
pub(crate) fn branch(root: &Path) -> Option<String> {
    let head = std::fs::read_to_string(git_dir(root)?.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref:") {
        Some(reference) => {
            let reference = reference.trim();
            Some(
                reference
                    .strip_prefix("refs/heads/")
                    .unwrap_or(reference)
                    .to_string(),
            )
        }
        None if !head.is_empty() => Some("HEAD".to_string()),
        None => None,
    }
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Added,
    Deleted,
    Modified,
}

impl Change {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Deleted => "deleted",
            Change::Modified => "modified",
        }
    }
}

/// A changed file: its path relative to the repository, lines added and removed, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Changed {
    pub path: String,
    pub added: u64,
    pub removed: u64,
    pub change: Change,
}

fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// The files changed in the working tree against `HEAD` (staged or not, untracked included);
/// empty when `root` is not a repository or git cannot be run.
pub(crate) fn changes(root: &Path) -> Vec<Changed> {
    if !is_repo(root) {
        return Vec::new();
    }
    let Some(status) = git(
        root,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    ) else {
        return Vec::new();
    };
    let counts = numstat(root);
    let mut out = Vec::new();
    let mut entries = status.split(|b| *b == 0).filter(|e| e.len() > 3);
    while let Some(entry) = entries.next() {
        let code = &entry[..2];
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        // A rename is followed by its old path, which is not listed on its own.
        if code.contains(&b'R') || code.contains(&b'C') {
            entries.next();
        }
        let change = if code == b"??" || code.contains(&b'A') {
            Change::Added
        } else if code.contains(&b'D') {
            Change::Deleted
        } else {
            Change::Modified
        };
        let (added, removed) = match counts.get(&path) {
            Some(&counted) => counted,
            None if change == Change::Added => (line_count(&root.join(&path)), 0),
            None => (0, 0),
        };
        out.push(Changed {
            path,
            added,
            removed,
            change,
        });
    }
    out
}

/// Lines added and removed per tracked file against `HEAD` (binary files count 0).
fn numstat(root: &Path) -> BTreeMap<String, (u64, u64)> {
    let Some(out) = git(root, &["diff", "--numstat", "-z", "HEAD"]) else {
        return BTreeMap::new();
    };
    let mut counts = BTreeMap::new();
    for record in out.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(record);
        let mut fields = text.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if path.is_empty() {
            continue;
        }
        counts.insert(
            path.to_string(),
            (added.parse().unwrap_or(0), removed.parse().unwrap_or(0)),
        );
    }
    counts
}

fn line_count(path: &Path) -> u64 {
    std::fs::read(path)
        .map(|bytes| {
            let lines = bytes.iter().filter(|b| **b == b'\n').count();
            let unterminated = usize::from(bytes.last().is_some_and(|b| *b != b'\n'));
            u64::try_from(lines + unterminated).unwrap_or(u64::MAX)
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_branch_comes_from_head_and_a_folder_without_git_has_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(branch(dir.path()), None);
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        assert_eq!(branch(dir.path()).as_deref(), Some("feature/x"));
        std::fs::write(dir.path().join(".git/HEAD"), "0123abcd\n").unwrap();
        assert_eq!(branch(dir.path()).as_deref(), Some("HEAD"));
    }

    #[test]
    fn a_worktree_git_file_points_to_its_git_folder() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real-git");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("HEAD"), "ref: refs/heads/side\n").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join(".git"), format!("gitdir: {}\n", real.display())).unwrap();
        assert_eq!(branch(&tree).as_deref(), Some("side"));
    }

    #[test]
    fn a_folder_that_is_not_a_repository_has_no_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
        assert!(changes(dir.path()).is_empty());
    }
}
