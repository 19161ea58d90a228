//! The built-in tools on a real project on disk, through `run_tool` and a `ToolContext` whose
//! host answers permission asks from a fixed ruleset and records them.
//!
//! Shared here: that host, the delegate that records subagent requests, and the project `Env`.

mod bash;
mod external_directories;
mod list_glob_grep;
mod names_and_arguments;
mod read;
mod task;
mod todos;
mod truncation;
mod write_and_edit;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use taskforce_agents::agent::Registry;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{ModelRef, Todo, ToolMetadata};
use taskforce_agents::permission::{self, Action, PermissionAsk, PermissionError, Rule, Ruleset};
use taskforce_agents::tool::{
    self, Delegate, SubagentOutcome, SubagentRequest, ToolContext, ToolError, ToolHost, ToolOutput,
    run_tool,
};
use tokio_util::sync::CancellationToken;

use super::fixture::Fixture;

/// A recorded `set_metadata` call.
type MetadataCall = (Option<String>, Map<String, Value>);

/// A host that answers asks from `rules` (allow → Ok, deny → Denied, ask → Rejected).
#[derive(Default)]
struct Host {
    rules: Ruleset,
    asks: Mutex<Vec<PermissionAsk>>,
    metadata: Mutex<Vec<MetadataCall>>,
    todos: Mutex<Vec<Todo>>,
}

#[async_trait]
impl ToolHost for Host {
    async fn ask(&self, _ctx: &ToolContext, ask: PermissionAsk) -> Result<(), PermissionError> {
        self.asks.lock().unwrap().push(ask.clone());
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
        self.metadata
            .lock()
            .unwrap()
            .push((title, metadata.to_json()));
    }

    async fn todos(&self, _session: &SessionId) -> Result<Vec<Todo>, ToolError> {
        Ok(self.todos.lock().unwrap().clone())
    }

    async fn set_todos(&self, _session: &SessionId, todos: Vec<Todo>) -> Result<(), ToolError> {
        *self.todos.lock().unwrap() = todos;
        Ok(())
    }
}

/// A delegate that records requests and answers with a fixed text and child session.
struct Recorder {
    requests: Mutex<Vec<SubagentRequest>>,
    child: SessionId,
}

#[async_trait]
impl Delegate for Recorder {
    async fn run_subagent(
        &self,
        _ctx: &ToolContext,
        request: SubagentRequest,
    ) -> Result<SubagentOutcome, ToolError> {
        let model = request.model.clone();
        self.requests.lock().unwrap().push(request);
        let mut outcome =
            SubagentOutcome::completed(self.child.clone(), "All done: 3 files found.", model);
        outcome.summary = vec![
            serde_json::from_value(
                json!({"id": "prt_1", "tool": "grep", "state": {"status": "completed", "title": "x"}}),
            )
            .unwrap(),
        ];
        Ok(outcome)
    }
}

/// A project on disk, its registry, a host and a delegate.
struct Env {
    fixture: Fixture,
    registry: Arc<Registry>,
    data_dir: PathBuf,
    host: Arc<Host>,
    delegate: Arc<Recorder>,
}

impl Env {
    /// A project whose host allows everything.
    fn new() -> Env {
        Env::with("", vec![Rule::new("*", "*", Action::Allow)])
    }

    /// A project with `config` as its taskforce.toml and a host answering from `rules`.
    fn with(config: &str, rules: Ruleset) -> Env {
        let fixture = Fixture::new();
        fixture.project_file("taskforce.toml", config);
        let loaded = fixture.load();
        let registry = Arc::new(Registry::new(&loaded.config, &loaded.paths).unwrap());
        Env {
            fixture,
            registry,
            data_dir: loaded.paths.data_dir,
            host: Arc::new(Host {
                rules,
                ..Host::default()
            }),
            delegate: Arc::new(Recorder {
                requests: Mutex::new(Vec::new()),
                child: SessionId::new(),
            }),
        }
    }

    /// A project whose host answers with the rules of the built-in `agent`.
    fn with_agent_rules(agent: &str) -> Env {
        let env = Env::new();
        let rules = env.registry.get(agent).unwrap().permission.clone();
        Env {
            host: Arc::new(Host {
                rules,
                ..Host::default()
            }),
            ..env
        }
    }

    fn root(&self) -> &Path {
        &self.fixture.project
    }

    fn file(&self, rel: &str, text: &str) -> PathBuf {
        self.fixture.project_file(rel, text)
    }

    fn ctx_for(&self, agent: &str) -> ToolContext {
        ToolContext {
            session_id: SessionId::new(),
            message_id: MessageId::new(),
            call_id: "call_test".into(),
            agent: Arc::new(self.registry.get(agent).unwrap().clone()),
            model: ModelRef::new("caller", "caller-model"),
            directory: self.root().to_path_buf(),
            project_root: self.root().to_path_buf(),
            data_dir: self.data_dir.clone(),
            home: None,
            abort: CancellationToken::new(),
            bypass_agent_check: false,
            subtask_model: None,
            registry: self.registry.clone(),
            host: self.host.clone(),
            delegate: Some(self.delegate.clone()),
        }
    }

    fn ctx(&self) -> ToolContext {
        self.ctx_for("build")
    }

    fn asks(&self) -> Vec<PermissionAsk> {
        self.host.asks.lock().unwrap().clone()
    }

    fn requests(&self) -> Vec<SubagentRequest> {
        self.delegate.requests.lock().unwrap().clone()
    }

    async fn run(&self, id: &str, args: Value) -> Result<ToolOutput, ToolError> {
        run_tool(tool::tool(id).unwrap().as_ref(), args, &self.ctx()).await
    }
}

fn err_text(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Ok(out) => panic!("expected an error, got {:?}", out.output),
        Err(e) => e.to_string(),
    }
}
