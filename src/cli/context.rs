//! What every subcommand needs: the loaded configuration and the agent registry.

use std::collections::BTreeMap;

use taskforce_agents::agent::{AgentInfo, Registry};
use taskforce_agents::config::{LoadOptions, LoadedConfig, load, redact};
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::Providers;

use super::{GlobalArgs, UsageError};

/// The configuration and agents of this invocation.
pub struct Context {
    /// The merged configuration and its paths.
    pub loaded: LoadedConfig,
    /// Every agent.
    pub registry: Registry,
    /// The `--data-dir` flag, when given.
    pub data_dir_flag: Option<std::path::PathBuf>,
    /// The environment the configuration was read with; providers read their keys from it.
    pub env: BTreeMap<String, String>,
}

impl Context {
    /// Loads configuration and agents; any failure is a usage error (exit status 2).
    pub fn load(global: &GlobalArgs) -> anyhow::Result<Context> {
        let options = LoadOptions::from_process(global.config.clone(), global.data_dir.clone())
            .map_err(UsageError::new)?;
        let loaded = load(&options).map_err(UsageError::new)?;
        let mut secrets = redact::secrets(&loaded.config, &options.env);
        secrets.extend(options.env.get("TASKFORCE_SERVER_PASSWORD").cloned());
        super::logging::protect(secrets);
        let registry = Registry::new(&loaded.config, &loaded.paths).map_err(UsageError::new)?;
        Ok(Context {
            loaded,
            registry,
            data_dir_flag: global.data_dir.clone(),
            env: options.env,
        })
    }

    /// Checks, before anything is stored, that the model a run will use (`model`, else the
    /// agent's, else the configured default) has a usable provider: an unknown provider or a
    /// missing key is a usage error saying what to set.
    pub fn check_model(&self, model: Option<&ModelRef>, agent: &str) -> anyhow::Result<()> {
        let agent_model = self.registry.get(agent).and_then(|a| a.model.as_ref());
        let Some(model) = model.or(agent_model).or(self.loaded.config.model.as_ref()) else {
            return Ok(());
        };
        let providers = Providers::new(&self.loaded.config, &self.env).map_err(UsageError::new)?;
        providers
            .check(&model.provider_id)
            .map_err(|e| UsageError::new(e).into())
    }

    /// The agent called `name`, or the default agent; an unknown name is a usage error.
    pub fn agent(&self, name: Option<&str>) -> anyhow::Result<&AgentInfo> {
        match name {
            Some(n) => Ok(self.registry.require(n).map_err(UsageError::new)?),
            None => Ok(self.registry.default_agent()),
        }
    }
}

impl Context {
    /// Runs `body` with a started runtime inside an actix system on a multi-thread tokio runtime.
    pub fn with_runtime<T, F, Fut>(&self, body: F) -> anyhow::Result<T>
    where
        F: FnOnce(taskforce_actors::Runtime) -> Fut + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + 'static,
        T: 'static,
    {
        self.start_runtime(true, true, false, body)
    }

    /// [`Context::with_runtime`] that joins the cluster of the configuration's `[cluster]`
    /// when `cluster` is set (`taskforce serve --cluster`).
    pub fn with_node_runtime<T, F, Fut>(&self, cluster: bool, body: F) -> anyhow::Result<T>
    where
        F: FnOnce(taskforce_actors::Runtime) -> Fut + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + 'static,
        T: 'static,
    {
        self.start_runtime(true, true, cluster, body)
    }

    /// [`Context::with_runtime`] that starts no work of its own: pending background results
    /// wait for `serve` (or a `run` of their own tree) rather than being delivered by a command
    /// that ends before their answer.
    pub fn with_quiet_runtime<T, F, Fut>(&self, body: F) -> anyhow::Result<T>
    where
        F: FnOnce(taskforce_actors::Runtime) -> Fut + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + 'static,
        T: 'static,
    {
        self.start_runtime(false, true, false, body)
    }

    /// [`Context::with_quiet_runtime`] for commands that run no agent with tools (listing and
    /// managing sessions): the MCP servers are not started.
    pub fn with_store_runtime<T, F, Fut>(&self, body: F) -> anyhow::Result<T>
    where
        F: FnOnce(taskforce_actors::Runtime) -> Fut + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + 'static,
        T: 'static,
    {
        self.start_runtime(false, false, false, body)
    }

    fn start_runtime<T, F, Fut>(
        &self,
        deliver_background: bool,
        mcp: bool,
        cluster: bool,
        body: F,
    ) -> anyhow::Result<T>
    where
        F: FnOnce(taskforce_actors::Runtime) -> Fut + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + 'static,
        T: 'static,
    {
        let tokio_rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let system = actix::System::with_tokio_rt(move || tokio_rt);
        let mut options = taskforce_actors::RuntimeOptions::new(self.loaded.clone());
        options.env = self.env.clone();
        options.deliver_background = deliver_background;
        options.skills = Some(self.registry.skills().clone());
        options.mcp = mcp;
        options.cluster = cluster;
        system.block_on(async move {
            let runtime = taskforce_actors::Runtime::start(options)
                .await
                .map_err(UsageError::new)?;
            let result = body(runtime.clone()).await;
            // Whatever still runs is cancelled and recorded, and the lock file goes.
            runtime.stop(super::signals::STOP_GRACE).await;
            result
        })
    }
}
