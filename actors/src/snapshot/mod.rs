//! Snapshots of a project's worktree, kept in a git store of their own under the data
//! directory (the project's own repository is never touched), so that what a turn changed can
//! be undone and redone.

mod diff;
mod git;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dashmap::DashMap;
use sha2::{Digest, Sha256};
use taskforce_agents::id::PartId;
use tokio::sync::Mutex;

use git::Git;

/// Untracked files larger than this are left out of snapshots.
const LARGE: u64 = 2 * 1024 * 1024;

/// A snapshot just taken: its tree's hash, and an id minted while no other snapshot of the
/// worktree could be taken, so that ids order snapshots as they were taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken {
    pub hash: String,
    pub order: PartId,
}

/// The snapshot stores of every worktree sessions run in.
pub(crate) struct Snapshots {
    /// Where stores live: `<data>/snapshot/<hash of the worktree's path>`.
    root: PathBuf,
    /// The data directory, left out of snapshots when it lies inside a worktree.
    data_dir: PathBuf,
    enabled: bool,
    /// By directory sessions run in: the store of its worktree, none outside a git project.
    stores: DashMap<PathBuf, Option<Arc<Store>>, foldhash::fast::RandomState>,
}

/// One worktree's store; its lock lets one git call sequence at a time touch its index.
struct Store {
    git: Git,
    /// Whether the store was found or made.
    ready: Mutex<bool>,
}

impl Snapshots {
    /// Stores under `data_dir`; none are made when `enabled` is false.
    pub fn new(data_dir: &Path, enabled: bool) -> Self {
        Snapshots {
            root: data_dir.join("snapshot"),
            data_dir: data_dir.to_path_buf(),
            enabled,
            stores: DashMap::default(),
        }
    }

    /// The store of the worktree holding `dir`, when snapshots are on and it is a git project.
    fn store(&self, dir: &Path) -> Option<Arc<Store>> {
        if !self.enabled {
            return None;
        }
        if let Some(known) = self.stores.get(dir) {
            return known.clone();
        }
        let store = worktree_of(dir).map(|worktree| {
            let key = Sha256::digest(worktree.to_string_lossy().as_bytes());
            let name: String = key.iter().take(10).map(|b| format!("{b:02x}")).collect();
            Arc::new(Store {
                git: Git {
                    dir: self.root.join(name),
                    worktree,
                },
                ready: Mutex::new(false),
            })
        });
        self.stores.insert(dir.to_path_buf(), store.clone());
        store
    }

    /// Records the worktree holding `dir` as it is now; none when snapshots are off there or
    /// git failed (logged).
    pub async fn track(&self, dir: &Path) -> Option<Taken> {
        let store = self.store(dir)?;
        let mut ready = store.ready.lock().await;
        if !*ready {
            *ready = self.prepare(&store.git).await;
            if !*ready {
                return None;
            }
        }
        self.stage(&store.git).await;
        let tree = store.git.run(["write-tree"]).await;
        if !tree.ok {
            tracing::warn!(store = %store.git.dir.display(), error = %tree.stderr, "cannot snapshot the worktree");
            return None;
        }
        Some(Taken {
            hash: tree.text(),
            order: PartId::new(),
        })
    }

    /// The files (absolute paths) that differ now from snapshot `hash`.
    pub async fn changed_since(&self, dir: &Path, hash: &str) -> Vec<String> {
        let Some(store) = self.store(dir) else {
            return Vec::new();
        };
        let _ready = store.ready.lock().await;
        self.stage(&store.git).await;
        let out = store
            .git
            .run([
                "diff",
                "--cached",
                "--no-ext-diff",
                "--no-renames",
                "--name-only",
                "-z",
                hash,
                "--",
                ".",
            ])
            .await;
        if !out.ok {
            tracing::warn!(hash, error = %out.stderr, "cannot list the files a step changed");
            return Vec::new();
        }
        out.entries()
            .into_iter()
            .map(|rel| store.git.worktree.join(rel).to_string_lossy().into_owned())
            .collect()
    }

    /// Puts each file back as it was in its snapshot: `(snapshot, absolute path)`, the first
    /// snapshot named for a file winning; a file the snapshot did not have is deleted.
    pub async fn revert(&self, dir: &Path, files: &[(String, String)]) {
        let Some(store) = self.store(dir) else {
            return;
        };
        let _ready = store.ready.lock().await;
        let mut seen = std::collections::HashSet::new();
        for (hash, file) in files {
            if !seen.insert(file.as_str()) {
                continue;
            }
            let path = PathBuf::from(file);
            let Some(rel) = store.git.relative(&path) else {
                continue;
            };
            let spec = format!(":(top,literal){rel}");
            let out = store
                .git
                .run(["checkout", hash.as_str(), "--", spec.as_str()])
                .await;
            if out.ok {
                continue;
            }
            let listed = store
                .git
                .run(["ls-tree", hash.as_str(), "--", rel.as_str()])
                .await;
            if listed.ok && !listed.text().is_empty() {
                tracing::warn!(file, hash, error = %out.stderr, "cannot restore a file from its snapshot");
                continue;
            }
            // The file did not exist then.
            if let Err(e) = tokio::fs::remove_file(&path).await
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(file, error = %e, "cannot remove a file the undone turn made");
            }
        }
    }

    /// Makes the store the first time: a git directory with the settings snapshots need.
    async fn prepare(&self, git: &Git) -> bool {
        if git.dir.join("HEAD").exists() {
            return true;
        }
        if let Err(e) = tokio::fs::create_dir_all(&git.dir).await {
            tracing::warn!(store = %git.dir.display(), error = %e, "cannot make the snapshot store");
            return false;
        }
        let init = git.run(["init", "-q"]).await;
        if !init.ok {
            tracing::warn!(store = %git.dir.display(), error = %init.stderr, "cannot make the snapshot store");
            return false;
        }
        for (key, value) in [
            ("core.autocrlf", "false"),
            ("core.longpaths", "true"),
            ("core.symlinks", "true"),
            ("core.fsmonitor", "false"),
            ("gc.auto", "0"),
        ] {
            git.run(["config", key, value]).await;
        }
        true
    }

    /// Brings the store's index up to the worktree: every file but the ignored ones, large
    /// untracked files and the data directory.
    async fn stage(&self, git: &Git) {
        let others = git
            .run(["ls-files", "--others", "--exclude-standard", "-z"])
            .await;
        let mut excluded: Vec<String> = Vec::new();
        if let Some(rel) = git.relative(&self.data_dir) {
            excluded.push(format!("/{rel}/"));
        }
        for rel in others.entries() {
            let big = tokio::fs::symlink_metadata(git.worktree.join(&rel))
                .await
                .is_ok_and(|m| m.is_file() && m.len() > LARGE);
            if big {
                excluded.push(format!("/{rel}"));
            }
        }
        write_excludes(git, &excluded).await;
        let add = git.run(["add", "--all", "--", "."]).await;
        if !add.ok {
            tracing::warn!(store = %git.dir.display(), error = %add.stderr, "cannot stage the worktree for a snapshot");
        }
    }
}

/// The snapshot store's exclude file: the project's own `info/exclude`, then `extra`.
async fn write_excludes(git: &Git, extra: &[String]) {
    let own = git.worktree.join(".git").join("info").join("exclude");
    let mut text = tokio::fs::read_to_string(&own).await.unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    let info = git.dir.join("info");
    let written = match tokio::fs::create_dir_all(&info).await {
        Ok(()) => tokio::fs::write(info.join("exclude"), text).await,
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        tracing::warn!(store = %git.dir.display(), error = %e, "cannot write the snapshot store's excludes");
    }
}

/// The git worktree holding `dir`: the nearest folder at or above it with a `.git`.
fn worktree_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests;
