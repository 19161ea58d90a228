//! The server's epoch: a number kept in the data directory and bumped at each start, so that
//! SSE ids (`<epoch>-<seq>`) of different server runs never look alike. The bus numbers events
//! from 1 again at each start; a client that reconnects with an id of an earlier run is told
//! to resync instead of silently skipping what it missed.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file in the data directory holding the last epoch.
pub const EPOCH_FILE: &str = "server-epoch";

/// Why the epoch file could not be bumped.
#[derive(Debug, thiserror::Error)]
pub enum EpochError {
    /// Reading, writing or renaming the file failed.
    #[error("cannot update the server epoch in {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Bumps the epoch kept in `data_dir` and answers the new one. The file is replaced
/// atomically (written beside it, then renamed). A file that does not hold a number counts as
/// an epoch newer than any count (the current time in milliseconds), so no id is reused.
pub fn bump(data_dir: &Path) -> Result<u64, EpochError> {
    let path = data_dir.join(EPOCH_FILE);
    let io = |source| EpochError::Io {
        path: path.clone(),
        source,
    };
    let previous = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|_| {
            tracing::warn!(
                "{} does not hold a number; starting a new epoch from the clock",
                path.display()
            );
            from_clock()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io(e)),
    };
    let next = previous.saturating_add(1);
    std::fs::create_dir_all(data_dir).map_err(io)?;
    let mut file = tempfile::NamedTempFile::new_in(data_dir).map_err(io)?;
    file.write_all(format!("{next}\n").as_bytes()).map_err(io)?;
    file.as_file().sync_all().map_err(io)?;
    file.persist(&path).map_err(|e| io(e.error))?;
    Ok(next)
}

/// The epoch to use when `data_dir` cannot keep one: the current time in milliseconds, larger
/// than any count the file reaches, so it is not one an earlier run used.
pub fn for_data_dir(data_dir: &Path) -> u64 {
    bump(data_dir).unwrap_or_else(|e| {
        tracing::warn!("{e}; the SSE ids of this run use the clock as their epoch");
        from_clock()
    })
}

fn from_clock() -> u64 {
    taskforce_agents::id::now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_start_gets_a_new_epoch_kept_in_the_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(bump(dir.path()).unwrap(), 1);
        assert_eq!(bump(dir.path()).unwrap(), 2);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(EPOCH_FILE)).unwrap(),
            "2\n"
        );
        // Only the epoch file is left behind (the temporary file was renamed onto it).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_damaged_epoch_file_moves_to_an_epoch_no_count_reached() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(EPOCH_FILE), "garbage").unwrap();
        let epoch = bump(dir.path()).unwrap();
        assert!(epoch > 1_600_000_000_000, "{epoch}");
        assert_eq!(bump(dir.path()).unwrap(), epoch + 1);
    }

    #[test]
    fn a_data_directory_that_cannot_keep_the_epoch_falls_back_to_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory should be.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let err = bump(&blocked).unwrap_err();
        assert!(err.to_string().contains("server epoch"), "{err}");
        assert!(for_data_dir(&blocked) > 1_600_000_000_000);
    }
}
