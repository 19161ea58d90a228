//! Which runtimes are alive: each holds an exclusive lock on its own file under
//! `<data_dir>/runtimes/` for as long as its process runs, so another runtime on the same data
//! directory can tell work left behind by a dead one (its lock is free or its file is gone) from
//! work a live one is still doing.

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
#[error("cannot create the runtime lock file {}: {message}", path.display())]
pub struct LockError {
    path: PathBuf,
    message: String,
}

impl OwnerLock {
    /// Takes a fresh lock under `data_dir`.
    pub fn acquire(data_dir: &Path) -> Result<OwnerLock, LockError> {
        let id = format!("rt_{}", Ulid::new());
        let dir = data_dir.join(DIR);
        let path = dir.join(format!("{id}.lock"));
        let fail = |e: std::io::Error| LockError {
            path: path.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&dir).map_err(fail)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(fail)?;
        file.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => fail(e),
            TryLockError::WouldBlock => fail(std::io::Error::other("held by another process")),
        })?;
        Ok(OwnerLock { id, path, file })
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
    fn ids_that_are_not_runtime_ids_are_not_alive() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_alive(dir.path(), "rt_missing"));
        assert!(!is_alive(dir.path(), "../../etc/passwd"));
        assert!(!is_alive(dir.path(), "rt_../x"));
        assert!(!is_alive(dir.path(), ""));
    }
}
