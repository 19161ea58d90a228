//! What changed since a snapshot: per file, for a session's diff, or as one unified patch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use taskforce_agents::model::{FileDiff, FileDiffStatus};

use super::Snapshots;
use super::git::Git;

/// Contents larger than this are shown empty in a diff (their line counts stay).
const SHOWN: usize = 1024 * 1024;

impl Snapshots {
    /// How each file differs now from its snapshot: `(snapshot, absolute path)`, the first
    /// snapshot named for a file winning; files back as they were are left out.
    pub async fn diffs(&self, dir: &Path, files: &[(String, String)]) -> Vec<FileDiff> {
        let Some(store) = self.store(dir) else {
            return Vec::new();
        };
        let _ready = store.ready.lock().await;
        self.stage(&store.git).await;
        let mut seen = HashSet::new();
        // Files by snapshot, in the order first named.
        let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
        for (hash, file) in files {
            let Some(rel) = store.git.relative(Path::new(file)) else {
                continue;
            };
            if !seen.insert(rel.clone()) {
                continue;
            }
            match groups.iter_mut().find(|(h, _)| h == hash) {
                Some((_, list)) => list.push(rel),
                None => groups.push((hash.as_str(), vec![rel])),
            }
        }
        let mut out = Vec::new();
        for (hash, rels) in groups {
            out.extend(group_diffs(&store.git, hash, &rels).await);
        }
        out.sort_by(|a, b| a.file.cmp(&b.file));
        out
    }

    /// The unified diff of the worktree now against snapshot `hash` (empty when none).
    pub async fn patch_text(&self, dir: &Path, hash: &str) -> String {
        let Some(store) = self.store(dir) else {
            return String::new();
        };
        let _ready = store.ready.lock().await;
        self.stage(&store.git).await;
        let out = store
            .git
            .run(["diff", "--cached", "--no-ext-diff", hash, "--", "."])
            .await;
        if !out.ok {
            tracing::warn!(hash, error = %out.stderr, "cannot diff the worktree against a snapshot");
        }
        out.text()
    }
}

/// The diffs of `rels` between snapshot `hash` and the staged worktree.
async fn group_diffs(git: &Git, hash: &str, rels: &[String]) -> Vec<FileDiff> {
    let specs: Vec<String> = rels.iter().map(|r| format!(":(top,literal){r}")).collect();
    let args = |kind: &'static str| {
        let mut a: Vec<&str> = vec![
            "diff",
            "--cached",
            "--no-ext-diff",
            "--no-renames",
            kind,
            "-z",
            hash,
            "--",
        ];
        a.extend(specs.iter().map(String::as_str));
        a
    };
    let numstat = git.run(args("--numstat")).await;
    let names = git.run(args("--name-status")).await;
    if !numstat.ok || !names.ok {
        tracing::warn!(hash, error = %numstat.stderr, "cannot diff files against a snapshot");
        return Vec::new();
    }
    let statuses = parse_name_status(&names.entries());
    let mut out = Vec::new();
    for (rel, (additions, deletions)) in parse_numstat(&numstat.entries()) {
        let status = statuses
            .get(&rel)
            .copied()
            .unwrap_or(FileDiffStatus::Modified);
        let binary = additions.is_none();
        let before = if binary || status == FileDiffStatus::Added {
            String::new()
        } else {
            shown(&git.run(["show", &format!("{hash}:{rel}")]).await.stdout)
        };
        let after = if binary || status == FileDiffStatus::Deleted {
            String::new()
        } else {
            shown(
                &tokio::fs::read(worktree_file(git, &rel))
                    .await
                    .unwrap_or_default(),
            )
        };
        out.push(FileDiff {
            file: rel,
            before,
            after,
            additions: additions.unwrap_or(0),
            deletions: deletions.unwrap_or(0),
            status: Some(status),
        });
    }
    out
}

/// `rel`'s path in the worktree.
fn worktree_file(git: &Git, rel: &str) -> PathBuf {
    git.worktree.join(rel)
}

/// Text contents as a diff shows them: empty for binary or very large contents.
fn shown(bytes: &[u8]) -> String {
    if bytes.len() > SHOWN || bytes.contains(&0) {
        return String::new();
    }
    String::from_utf8_lossy(bytes).into_owned()
}

/// `--numstat -z` entries (`added\tdeleted\tpath`): line counts by path, none for binary files.
fn parse_numstat(entries: &[String]) -> BTreeMap<String, (Option<u64>, Option<u64>)> {
    entries
        .iter()
        .filter_map(|e| {
            let mut fields = e.splitn(3, '\t');
            let (added, deleted, path) = (fields.next()?, fields.next()?, fields.next()?);
            Some((path.to_string(), (added.parse().ok(), deleted.parse().ok())))
        })
        .collect()
}

/// `--name-status -z` entries (status, then path): how each path changed.
fn parse_name_status(entries: &[String]) -> HashMap<String, FileDiffStatus> {
    entries
        .chunks(2)
        .filter_map(|pair| {
            let [code, path] = pair else { return None };
            let status = match code.chars().next()? {
                'A' => FileDiffStatus::Added,
                'D' => FileDiffStatus::Deleted,
                _ => FileDiffStatus::Modified,
            };
            Some((path.clone(), status))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_of_git_diff_are_read_per_path() {
        let numstat = vec!["3\t1\tsrc/a.rs".to_string(), "-\t-\tlogo.png".to_string()];
        let counts = parse_numstat(&numstat);
        assert_eq!(counts["src/a.rs"], (Some(3), Some(1)));
        assert_eq!(
            counts["logo.png"],
            (None, None),
            "binary files have no counts"
        );
        let names: Vec<String> = ["A", "new.txt", "D", "gone.txt", "M", "src/a.rs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let statuses = parse_name_status(&names);
        assert_eq!(statuses["new.txt"], FileDiffStatus::Added);
        assert_eq!(statuses["gone.txt"], FileDiffStatus::Deleted);
        assert_eq!(statuses["src/a.rs"], FileDiffStatus::Modified);
    }

    #[test]
    fn binary_and_huge_contents_are_shown_empty() {
        assert_eq!(shown(b"a\nb\n"), "a\nb\n");
        assert_eq!(shown(b"a\0b"), "");
        assert_eq!(shown(&vec![b'x'; SHOWN + 1]), "");
    }
}
