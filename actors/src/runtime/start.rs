//! Starting a runtime: its services, its supervisor and subagents, its place in a cluster, and
//! the repair of what earlier runtimes left half-way.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix::Actor;
use taskforce_agents::agent::Registry;
use taskforce_agents::command::Commands;
use taskforce_agents::config::LoadedConfig;
use taskforce_agents::provider::Providers;
use taskforce_agents::skill::Skills;
use taskforce_agents::tool::configured_tools;

use super::{Runtime, RuntimeOptions, cluster};
use crate::RuntimeError;
use crate::bus::BusHandle;
use crate::cluster::Cluster;
use crate::core::Core;
use crate::id_map::IdMap;
use crate::mcp::{Mcp, StopOnDrop};
use crate::owner::{self, OwnerLock};
use crate::permission::PermissionBroker;
use crate::question::QuestionBroker;
use crate::session::Writer;
use crate::snapshot::Snapshots;
use crate::store::{Store, open_store};
use crate::subagent::Subagents;
use crate::supervisor::Supervisor;
use crate::touch::Toucher;

impl Runtime {
    /// Starts the runtime on the store the configuration names (`[store] url`; SQLite in the
    /// data directory by default); must be called inside an actix `System`.
    pub async fn start(options: RuntimeOptions) -> Result<Runtime, RuntimeError> {
        let loaded = &options.loaded;
        let store = open_store(&loaded.config.store, &loaded.paths.data_dir).await?;
        Self::start_with_store(options, store).await
    }

    /// Starts the runtime on a given store (for example a PostgreSQL implementation).
    pub async fn start_with_store(
        options: RuntimeOptions,
        store: Arc<dyn Store>,
    ) -> Result<Runtime, RuntimeError> {
        let LoadedConfig { config, paths, .. } = options.loaded;
        let config_for_commands = config.clone();
        let skills = options.skills.unwrap_or_else(|| Skills::discover(&paths));
        let registry = Registry::with_skills(&config, &paths, skills)?;
        let providers = Providers::new(&config, &options.env)?;
        let bus = BusHandle::start(options.bus_capacity);
        // Joined before anything is published, so that every event of this node reaches the
        // cluster.
        let cluster = match options.cluster {
            true => Some(Cluster::join(&config.cluster, &bus).await?),
            false => None,
        };
        let project_id = paths.project_root.display().to_string();
        // The project's "always" approvals from earlier runs apply from the start.
        let broker = PermissionBroker::load(bus.clone(), store.clone(), project_id.clone()).await?;
        let owner = OwnerLock::acquire(&paths.data_dir)?;
        // From now on the answers this runtime leaves unfinished name it.
        store.set_runtime(&owner.id);
        store.hold_alive(&owner.id).await?;
        let tools = configured_tools(&config, &options.env);
        let names = tools.iter().map(|t| Arc::from(t.id())).collect();
        let schemas = tools.iter().map(|t| Arc::new(t.parameters())).collect();
        let snapshots = Snapshots::new(&paths.data_dir, config.snapshot != Some(false));
        // Servers connect in the background: a slow one holds up neither the start nor a
        // prompt.
        let reserved = tools.iter().map(|t| t.id().to_string()).collect();
        let mcp = Mcp::start(
            &config,
            paths.cwd.clone(),
            bus.clone(),
            reserved,
            options.mcp,
        );
        let toucher = Toucher::start(store.clone(), bus.clone());
        let core = Arc::new(Core {
            store,
            broker: Arc::new(broker),
            questions: Arc::new(QuestionBroker::new(bus.clone())),
            bus,
            registry: Arc::new(registry),
            providers: Arc::new(providers),
            config: Arc::new(config),
            project_id,
            paths,
            tools,
            names,
            schemas,
            descriptions: Default::default(),
            offered: Default::default(),
            mcp: mcp.clone(),
            children: OnceLock::new(),
            idle_stop: options.idle_stop,
            flush_every: Duration::from_millis(200),
            retry_base: options.retry_base,
            statuses: IdMap::default(),
            hooks: Default::default(),
            commands: Commands::new(&config_for_commands),
            owner,
            stopping: Default::default(),
            snapshots,
            toucher,
        });
        let arbiters = if options.arbiters == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            options.arbiters
        };
        let queued = Arc::new(IdMap::default());
        let supervisor =
            Supervisor::new(core.clone(), arbiters, options.pin_arbiters, queued.clone());
        let places = supervisor.places();
        let supervisor = supervisor.start();
        let subagents = Subagents::new(core.clone(), supervisor.clone(), places, queued);
        let _ = core.children.set(subagents.clone());
        if let Some(cluster) = &cluster {
            cluster.start_lease(
                cluster::cluster_load(&core, &subagents),
                cluster::close_asks_when_taken_for_dead(&core),
            );
            cluster::join_cluster(cluster, &core, &subagents, &supervisor).await?;
        }
        // Runs that runtimes which died left half-way are ended first: nothing (a delivery
        // below, a prompt) builds on them as they are. Their lock files go too.
        let repaired = crate::session::repair_dead_runs(&core, None).await;
        owner::sweep(&core.paths.data_dir);
        // Background results a previous runtime could not deliver (or children it left running
        // when it died) go to their parents now.
        if options.deliver_background {
            subagents.deliver_pending(None).await;
        }
        Ok(Runtime {
            writer: Writer::new(core.clone()),
            core,
            supervisor,
            subagents,
            repaired: repaired.into(),
            _mcp: Arc::new(StopOnDrop(mcp)),
            cluster,
        })
    }

    /// Starts the runtime with its own actix system on a dedicated thread, for plain tokio hosts.
    pub fn spawn_dedicated(options: RuntimeOptions) -> Result<Runtime, RuntimeError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("taskforce-runtime".into())
            .spawn(move || {
                let system = actix::System::with_tokio_rt(|| {
                    tokio::runtime::Builder::new_multi_thread()
                        .enable_all()
                        .build()
                        .unwrap_or_else(|e| panic!("cannot build the tokio runtime: {e}"))
                });
                system.block_on(async move {
                    let started = Runtime::start(options).await;
                    let ok = started.is_ok();
                    let _ = tx.send(started);
                    if ok {
                        // Keep the system alive for the runtime's lifetime.
                        std::future::pending::<()>().await;
                    }
                });
            })
            .map_err(|e| RuntimeError::InvalidInput(format!("cannot start a thread: {e}")))?;
        rx.recv().map_err(|_| RuntimeError::Stopped)?
    }
}
