//! What every subcommand needs: the loaded configuration and the agent registry.

use taskforce_agents::agent::{AgentInfo, Registry};
use taskforce_agents::config::{LoadOptions, LoadedConfig, load};

use super::{GlobalArgs, UsageError};

/// The configuration and agents of this invocation.
pub struct Context {
    /// The merged configuration and its paths.
    pub loaded: LoadedConfig,
    /// Every agent.
    pub registry: Registry,
}

impl Context {
    /// Loads configuration and agents; any failure is a usage error (exit status 2).
    pub fn load(global: &GlobalArgs) -> anyhow::Result<Context> {
        let options = LoadOptions::from_process(global.config.clone(), global.data_dir.clone())
            .map_err(UsageError::new)?;
        let loaded = load(&options).map_err(UsageError::new)?;
        let registry = Registry::new(&loaded.config, &loaded.paths).map_err(UsageError::new)?;
        Ok(Context { loaded, registry })
    }

    /// The agent called `name`, or the default agent; an unknown name is a usage error.
    pub fn agent(&self, name: Option<&str>) -> anyhow::Result<&AgentInfo> {
        match name {
            Some(n) => Ok(self.registry.require(n).map_err(UsageError::new)?),
            None => Ok(self.registry.default_agent()),
        }
    }
}
