//! A throwaway project on disk: a git project folder, a home folder and a data folder below one
//! temporary directory that is removed when the sandbox is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use taskforce_agents::config::{LoadOptions, LoadedConfig, load};
use tempfile::TempDir;

/// A temporary project folder (a git work tree), home folder and data folder.
#[derive(Debug)]
pub struct Sandbox {
    dir: TempDir,
    /// The project folder; it holds an empty `.git`, so it is a project root.
    pub project: PathBuf,
    /// The home folder the program under test sees as `HOME`.
    pub home: PathBuf,
    /// The data folder (not created: the program under test makes it).
    pub data: PathBuf,
}

impl Default for Sandbox {
    fn default() -> Sandbox {
        Sandbox::new()
    }
}

impl Sandbox {
    /// An empty git project and an empty home below a new temporary directory.
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
        let project = dir.path().join("project");
        let home = dir.path().join("home");
        create_dir(&project.join(".git"));
        create_dir(&home);
        Sandbox {
            data: dir.path().join("data"),
            project,
            home,
            dir,
        }
    }

    /// The temporary directory holding the project, home and data folders.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `rel` below the project (making its folders); answers the path.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        write_file(&self.project.join(rel), text)
    }

    /// Writes `text` to `rel` below the home folder (making its folders); answers the path.
    pub fn home_file(&self, rel: &str, text: &str) -> PathBuf {
        write_file(&self.home.join(rel), text)
    }

    /// Writes the project's configuration file, `taskforce.toml`; answers its path.
    pub fn config(&self, toml: &str) -> PathBuf {
        self.file("taskforce.toml", toml)
    }

    /// The configuration of the sandbox's project with its data folder, read with `env` as the
    /// environment. Panics when it does not load.
    pub fn load(&self, env: &BTreeMap<String, String>) -> LoadedConfig {
        load(&LoadOptions {
            cwd: self.project.clone(),
            config_file: None,
            data_dir: Some(self.data.clone()),
            env: env.clone(),
        })
        .unwrap_or_else(|e| panic!("the sandbox's configuration loads: {e}"))
    }

    /// The environment a hermetic run sees: only `HOME`, pointing into the sandbox.
    pub fn hermetic_env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("HOME".to_string(), self.home.display().to_string())])
    }
}

/// Writes `text` to `path`, making its folders; answers the path. Panics when it cannot.
pub fn write_file(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        create_dir(parent);
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path.to_path_buf()
}

/// Makes `path` and its parents. Panics when it cannot.
fn create_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("making {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_holds_a_git_project_and_a_home_and_writes_files_below_them() {
        let sandbox = Sandbox::new();
        assert!(sandbox.project.join(".git").is_dir());
        assert!(sandbox.home.is_dir());
        assert!(!sandbox.data.exists());
        let config = sandbox.config("model = \"scripted/echo\"\n");
        assert_eq!(config, sandbox.project.join("taskforce.toml"));
        let nested = sandbox.home_file("a/b.txt", "hi");
        assert_eq!(std::fs::read_to_string(nested).unwrap(), "hi");
        assert_eq!(
            sandbox.hermetic_env().get("HOME"),
            Some(&sandbox.home.display().to_string())
        );
    }
}
