//! A throwaway home and project on disk, and loading them with a hermetic environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use taskforce_agents::agent::Registry;
use taskforce_agents::config::{ConfigError, LoadOptions, LoadedConfig, load};
use taskforce_testkit::Sandbox;

pub struct Fixture {
    sandbox: Sandbox,
    pub home: PathBuf,
    pub project: PathBuf,
    pub env: BTreeMap<String, String>,
    pub config_file: Option<PathBuf>,
}

impl Fixture {
    /// An empty home and an empty git project.
    pub fn new() -> Fixture {
        let sandbox = Sandbox::new();
        Fixture {
            home: sandbox.home.clone(),
            project: sandbox.project.clone(),
            env: sandbox.hermetic_env(),
            config_file: None,
            sandbox,
        }
    }

    /// Writes `text` to `rel` below the project.
    pub fn project_file(&self, rel: &str, text: &str) -> PathBuf {
        self.sandbox.file(rel, text)
    }

    /// Writes `text` to `rel` below the home directory.
    pub fn home_file(&self, rel: &str, text: &str) -> PathBuf {
        self.sandbox.home_file(rel, text)
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
