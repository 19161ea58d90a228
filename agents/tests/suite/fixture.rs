//! A throwaway home and project on disk, and loading them with a hermetic environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use taskforce_agents::agent::Registry;
use taskforce_agents::config::{ConfigError, LoadOptions, LoadedConfig, load};

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub env: BTreeMap<String, String>,
    pub config_file: Option<PathBuf>,
}

impl Fixture {
    /// An empty home and an empty git project.
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        let mut env = BTreeMap::new();
        env.insert("HOME".to_string(), home.display().to_string());
        Fixture {
            _dir: dir,
            home,
            project,
            env,
            config_file: None,
        }
    }

    /// Writes `text` to `rel` below the project.
    pub fn project_file(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.project.join(rel), text)
    }

    /// Writes `text` to `rel` below the home directory.
    pub fn home_file(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.home.join(rel), text)
    }

    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.insert(key.to_string(), value.to_string());
    }

    pub fn try_load(&self) -> Result<LoadedConfig, ConfigError> {
        self.try_load_in(&self.project)
    }

    pub fn try_load_in(&self, cwd: &Path) -> Result<LoadedConfig, ConfigError> {
        load(&LoadOptions {
            cwd: cwd.to_path_buf(),
            config_file: self.config_file.clone(),
            data_dir: None,
            env: self.env.clone(),
        })
    }

    pub fn load(&self) -> LoadedConfig {
        self.try_load().unwrap()
    }

    pub fn registry(&self) -> Registry {
        let loaded = self.load();
        Registry::new(&loaded.config, &loaded.paths).unwrap()
    }

    /// The error text of a load that must fail.
    pub fn load_error(&self) -> String {
        match self.try_load() {
            Ok(_) => panic!("expected the configuration to be rejected"),
            Err(e) => e.to_string(),
        }
    }
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}
