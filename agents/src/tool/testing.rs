//! Test support for the built-in tools: a throwaway project on disk and a real `ToolHost` that
//! answers asks from a fixed ruleset and records them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{ToolContext, ToolError, ToolHost};
use crate::agent::Registry;
use crate::config::{Config, Paths};
use crate::id::{MessageId, SessionId};
use crate::model::{ModelRef, Todo, ToolMetadata};
use crate::permission::{self, Action, PermissionAsk, PermissionError, Rule, Ruleset};

/// A recorded `set_metadata` call: the title and the metadata.
pub(crate) type MetadataCall = (Option<String>, Map<String, Value>);

/// Answers asks from `rules` (allow → Ok, deny → Denied, ask → Rejected) and records them.
#[derive(Default)]
pub(crate) struct TestHost {
    pub rules: Ruleset,
    pub asks: Mutex<Vec<PermissionAsk>>,
    pub metadata: Mutex<Vec<MetadataCall>>,
    pub todos: Mutex<Vec<Todo>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl ToolHost for TestHost {
    async fn ask(&self, _ctx: &ToolContext, ask: PermissionAsk) -> Result<(), PermissionError> {
        lock(&self.asks).push(ask.clone());
        match permission::decide(&ask, &[&self.rules]) {
            permission::AskDecision::Allow => Ok(()),
            permission::AskDecision::Deny(rules) => Err(PermissionError::Denied { rules }),
            permission::AskDecision::Ask => Err(PermissionError::Rejected),
        }
    }

    fn check(&self, _ctx: &ToolContext, ask: &PermissionAsk) -> permission::AskDecision {
        permission::decide(ask, &[&self.rules])
    }

    fn set_metadata(&self, _ctx: &ToolContext, title: Option<String>, metadata: ToolMetadata) {
        lock(&self.metadata).push((title, metadata.to_json()));
    }

    async fn todos(&self, _session: &SessionId) -> Result<Vec<Todo>, ToolError> {
        Ok(lock(&self.todos).clone())
    }

    async fn set_todos(&self, _session: &SessionId, todos: Vec<Todo>) -> Result<(), ToolError> {
        *lock(&self.todos) = todos;
        Ok(())
    }
}

/// The folders of a project at `root` with data in `data`, and no home.
fn paths_of(root: &std::path::Path, data: &std::path::Path) -> Paths {
    Paths {
        cwd: root.to_path_buf(),
        project_root: root.to_path_buf(),
        project_dirs: vec![root.to_path_buf()],
        home: None,
        xdg_config: None,
        global_config_dir: None,
        data_dir: data.to_path_buf(),
    }
}

/// A temporary project (`<tmp>/project`) and data directory (`<tmp>/data`).
pub(crate) struct Project {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub data: PathBuf,
    pub host: Arc<TestHost>,
    pub registry: Arc<Registry>,
}

impl Project {
    /// A project whose host allows everything.
    pub fn new() -> Project {
        Project::with_rules(vec![Rule::new("*", "*", Action::Allow)])
    }

    /// A project whose host answers from `rules`.
    pub fn with_rules(rules: Ruleset) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("project");
        let data = base.join("data");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        let paths = paths_of(&root, &data);
        let registry = Arc::new(Registry::new(&Config::default(), &paths).unwrap());
        Project {
            _dir: dir,
            root,
            data,
            host: Arc::new(TestHost {
                rules,
                ..TestHost::default()
            }),
            registry,
        }
    }

    /// Writes `text` to `rel` below the project root.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Builds the registry again (to find the skills written since).
    pub fn reload_registry(&mut self) {
        let paths = paths_of(&self.root, &self.data);
        self.registry = Arc::new(Registry::new(&Config::default(), &paths).unwrap());
    }

    /// A folder beside the project (`<tmp>/outside`), created on first use.
    pub fn outside(&self) -> PathBuf {
        let dir = self.root.parent().unwrap().join("outside");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A symbolic link at `rel` below the project root pointing to `target`.
    #[cfg(unix)]
    pub fn link(&self, rel: &str, target: &std::path::Path) -> PathBuf {
        let path = self.root.join(rel);
        std::os::unix::fs::symlink(target, &path).unwrap();
        path
    }

    /// A context for the `build` agent in the project root.
    pub fn ctx(&self) -> ToolContext {
        ToolContext {
            session_id: SessionId::new(),
            message_id: MessageId::new(),
            call_id: "call_1".into(),
            agent: Arc::new(self.registry.get("build").unwrap().clone()),
            model: ModelRef::new("test", "model"),
            directory: self.root.clone(),
            project_root: self.root.clone(),
            data_dir: self.data.clone(),
            home: None,
            abort: CancellationToken::new(),
            bypass_agent_check: false,
            subtask_model: None,
            registry: self.registry.clone(),
            host: self.host.clone(),
            delegate: None,
        }
    }

    /// Every ask so far.
    pub fn asks(&self) -> Vec<PermissionAsk> {
        lock(&self.host.asks).clone()
    }
}
