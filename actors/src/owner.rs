//! Which runtimes are alive: each holds an exclusive lock on its own file under
//! `<data_dir>/runtimes/` for as long as its process runs, so another runtime on the same data
//! directory can tell work left behind by a dead one (its lock is free or its file is gone) from
//! work a live one is still doing. Lock files of runtimes that died are removed by the
//! runtimes that find them (see [`sweep`]).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use ulid::Ulid;

/// The directory under the data directory that holds the lock files.
const DIR: &str = "runtimes";

/// This runtime's id and the lock that says it is alive; released when dropped (or when the
/// process ends, however it ends).
#[derive(Debug)]
pub(crate) struct OwnerLock {
    /// The runtime's id, recorded on the work it owns.
    pub id: String,
    path: PathBuf,
    file: File,
}

/// Why the lock could not be taken.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot take the lock file {}: {message}", path.display())]
pub struct LockError {
    path: PathBuf,
    message: String,
}

/// How many fresh ids [`OwnerLock::acquire`] tries before giving up.
const ATTEMPTS: usize = 8;

impl OwnerLock {
    /// Takes a fresh lock under `data_dir`.
    pub fn acquire(data_dir: &Path) -> Result<OwnerLock, LockError> {
        let dir = data_dir.join(DIR);
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let id = format!("rt_{}", Ulid::new());
            let path = dir.join(format!("{id}.lock"));
            let fail = |e: std::io::Error| LockError {
                path: path.clone(),
                message: e.to_string(),
            };
            let file = open_lock_file(&dir, &path).map_err(fail)?;
            match file.try_lock() {
                Ok(()) => {}
                // Between its creation and its lock, another runtime sweeping the directory
                // looked at the file: it may remove it, so a fresh id is tried.
                Err(TryLockError::WouldBlock) => {
                    last = Some(fail(std::io::Error::other("held by another process")));
                    continue;
                }
                Err(TryLockError::Error(e)) => return Err(fail(e)),
            }
            // A sweep may have removed the file before the lock was taken: the lock then
            // guards nothing anyone can see.
            if same_file(&file, &path) {
                return Ok(OwnerLock { id, path, file });
            }
            last = Some(fail(std::io::Error::other(
                "removed while it was being locked",
            )));
        }
        Err(last.unwrap_or_else(|| LockError {
            path: dir,
            message: "no attempt was made".into(),
        }))
    }

    /// Gives the lock up before the process ends (the runtime was shut down): from now on
    /// other runtimes take this one for dead.
    pub fn release(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The directory under the data directory that holds the sessions' turn locks.
const SESSIONS_DIR: &str = "sessions";

/// The turn of one session across processes: a run that holds it is the only one prompting the
/// session; another waits for it. Released when dropped (or when the process ends).
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
    _file: File,
}

impl SessionLock {
    /// Takes the turn of `session` under `data_dir` if it is free; `None` when another process
    /// holds it.
    pub fn try_acquire(data_dir: &Path, session: &str) -> Result<Option<SessionLock>, LockError> {
        Self::take(data_dir, session, false)
    }

    /// Takes the turn of `session` under `data_dir`, blocking until its holder lets it go.
    pub fn acquire(data_dir: &Path, session: &str) -> Result<SessionLock, LockError> {
        Self::take(data_dir, session, true)?.ok_or_else(|| LockError {
            path: data_dir.join(SESSIONS_DIR),
            message: "no attempt was made".into(),
        })
    }

    fn take(data_dir: &Path, session: &str, wait: bool) -> Result<Option<SessionLock>, LockError> {
        let dir = data_dir.join(SESSIONS_DIR);
        let path = dir.join(format!("{session}.lock"));
        let fail = |e: std::io::Error| LockError {
            path: path.clone(),
            message: e.to_string(),
        };
        loop {
            let file = open_lock_file(&dir, &path).map_err(fail)?;
            if wait {
                file.lock().map_err(fail)?;
            } else {
                match file.try_lock() {
                    Ok(()) => {}
                    Err(TryLockError::WouldBlock) => return Ok(None),
                    Err(TryLockError::Error(e)) => return Err(fail(e)),
                }
            }
            // The holder before us removed the file as it let go: lock the one now named.
            if same_file(&file, &path) {
                return Ok(Some(SessionLock { path, _file: file }));
            }
        }
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Removed while still locked, so that whoever opened it next sees it is gone.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Opens (creating it and its directory `dir` if needed) the lock file at `path`, unlocked.
fn open_lock_file(dir: &Path, path: &Path) -> std::io::Result<File> {
    std::fs::create_dir_all(dir)?;
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

/// Whether `path` still names the open `file`.
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

/// Removes the lock files of runtimes that are gone (nobody holds their lock); answers their
/// ids. Files of live runtimes, and files whose lock cannot be checked, stay.
pub(crate) fn sweep(data_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join(DIR)) else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".lock")) else {
            continue;
        };
        if !is_alive(data_dir, id) {
            gone.push(id.to_string());
        }
    }
    gone
}

/// Whether the runtime `id` still runs, as the store tells (runtimes of several machines
/// sharing one database) or else as its lock file under `data_dir` tells.
pub(crate) async fn is_running(store: &dyn crate::store::Store, data_dir: &Path, id: &str) -> bool {
    match store.is_alive(id).await {
        Some(alive) => alive,
        None => is_alive(data_dir, id),
    }
}

/// Whether the runtime `id` still runs: its lock file exists and is locked. A file left by a
/// dead runtime is removed. An id that is not a runtime id names no live runtime.
pub(crate) fn is_alive(data_dir: &Path, id: &str) -> bool {
    if !id.starts_with("rt_") || !id[3..].chars().all(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    let path = data_dir.join(DIR).join(format!("{id}.lock"));
    let Ok(file) = OpenOptions::new().write(true).open(&path) else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => {
            // Nobody holds it: its runtime is gone.
            let _ = std::fs::remove_file(&path);
            false
        }
        Err(TryLockError::WouldBlock) => true,
        // The lock cannot be checked: assume alive rather than take over live work.
        Err(TryLockError::Error(_)) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_alive_and_a_released_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let lock = OwnerLock::acquire(dir.path()).unwrap();
        let other = OwnerLock::acquire(dir.path()).unwrap();
        assert_ne!(lock.id, other.id);
        assert!(is_alive(dir.path(), &lock.id));
        let id = lock.id.clone();
        drop(lock);
        assert!(!is_alive(dir.path(), &id));
        assert!(is_alive(dir.path(), &other.id));
    }

    #[test]
    fn a_file_left_unlocked_is_dead_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let runtimes = dir.path().join(DIR);
        std::fs::create_dir_all(&runtimes).unwrap();
        let path = runtimes.join("rt_01LEFTBEHIND.lock");
        std::fs::write(&path, "").unwrap();
        assert!(!is_alive(dir.path(), "rt_01LEFTBEHIND"));
        assert!(!path.exists());
    }

    #[test]
    fn a_sweep_removes_only_the_files_of_dead_runtimes() {
        let dir = tempfile::tempdir().unwrap();
        let live = OwnerLock::acquire(dir.path()).unwrap();
        let runtimes = dir.path().join(DIR);
        let dead = runtimes.join("rt_01DEADRUNTIME.lock");
        std::fs::write(&dead, "").unwrap();
        assert_eq!(sweep(dir.path()), vec!["rt_01DEADRUNTIME".to_string()]);
        assert!(!dead.exists());
        assert!(runtimes.join(format!("{}.lock", live.id)).exists());
        assert!(is_alive(dir.path(), &live.id));
    }

    #[test]
    fn a_lock_taken_while_others_sweep_stays_visible() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let sweeping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let sweeper = {
            let (path, sweeping) = (path.clone(), sweeping.clone());
            std::thread::spawn(move || {
                while sweeping.load(std::sync::atomic::Ordering::Relaxed) {
                    sweep(&path);
                }
            })
        };
        let locks: Vec<OwnerLock> = (0..200)
            .map(|_| OwnerLock::acquire(&path).unwrap())
            .collect();
        sweeping.store(false, std::sync::atomic::Ordering::Relaxed);
        sweeper.join().unwrap();
        for lock in &locks {
            assert!(is_alive(&path, &lock.id), "{} was swept away", lock.id);
        }
    }

    #[test]
    fn ids_that_are_not_runtime_ids_are_not_alive() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_alive(dir.path(), "rt_missing"));
        assert!(!is_alive(dir.path(), "../../etc/passwd"));
        assert!(!is_alive(dir.path(), "rt_../x"));
        assert!(!is_alive(dir.path(), ""));
    }
}
