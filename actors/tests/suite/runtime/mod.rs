//! The runtime end to end: real SQLite, real HTTP to a fake OpenAI-compatible server.
//!
//! Shared here (and with the other suites): the sandboxed project `Env`, runtime options,
//! prompting in the background, and readers of a session's tool parts and task outputs.

mod child_sessions;
mod commits_behind;
mod delegation;
mod sessions;
mod steps;
mod store_writes;
mod watched_store;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime, RuntimeError, RuntimeOptions};
use taskforce_agents::config::{LoadOptions, load};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ToolState;
use taskforce_testkit::Sandbox;

/// A sandboxed project configured for the runtime.
pub struct Env {
    sandbox: Sandbox,
}

impl Env {
    pub fn new(base_url: &str, extra: &str) -> Env {
        Env::with_config(&format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\napi_key = \"sk-test\"\n{extra}"
        ))
    }

    /// A project whose `taskforce.toml` is `config`.
    pub fn with_config(config: &str) -> Env {
        let sandbox = Sandbox::new();
        sandbox.file("notes.txt", "hello from the project\n");
        sandbox.config(config);
        Env { sandbox }
    }

    /// Writes `text` to `rel` below the project.
    pub fn file(&self, rel: &str, text: &str) {
        self.sandbox.file(rel, text);
    }

    /// The project directory.
    pub fn project(&self) -> PathBuf {
        self.sandbox.project.clone()
    }

    /// The environment the runtime sees: only `HOME`, pointing into the sandbox.
    pub fn hermetic_env(&self) -> BTreeMap<String, String> {
        self.sandbox.hermetic_env()
    }

    /// Runtime options for this project, with a hermetic environment.
    pub fn options(&self) -> RuntimeOptions {
        self.options_in(&self.sandbox.project)
    }

    /// Runtime options for another project with the same configuration beside this one,
    /// sharing its data directory.
    pub fn neighbour_options(&self) -> RuntimeOptions {
        let neighbour = self.sandbox.project.with_file_name("neighbour");
        std::fs::create_dir_all(neighbour.join(".git")).unwrap();
        std::fs::copy(
            self.sandbox.project.join("taskforce.toml"),
            neighbour.join("taskforce.toml"),
        )
        .unwrap();
        self.options_in(&neighbour)
    }

    fn options_in(&self, project: &std::path::Path) -> RuntimeOptions {
        options_at(project, &self.sandbox.data, &self.sandbox.home)
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.sandbox.data.clone()
    }

    /// The home directory the runtime sees.
    pub fn home(&self) -> PathBuf {
        self.sandbox.home.clone()
    }

    pub async fn runtime(&self) -> Runtime {
        Runtime::start(self.options()).await.unwrap()
    }
}

/// Runtime options for the project at `project` with data in `data` and `HOME` at `home`, as
/// [`Env::options`] makes them (for a runtime in another process of the same test).
pub fn options_at(
    project: &std::path::Path,
    data: &std::path::Path,
    home: &std::path::Path,
) -> RuntimeOptions {
    let mut env = BTreeMap::new();
    env.insert("HOME".to_string(), home.display().to_string());
    let loaded = load(&LoadOptions {
        cwd: project.to_path_buf(),
        config_file: None,
        data_dir: Some(data.to_path_buf()),
        env: env.clone(),
    })
    .unwrap();
    let mut options = RuntimeOptions::new(loaded);
    options.env = env;
    options.arbiters = 2;
    options.retry_base = Duration::from_millis(10);
    options
}

/// Prompts session `id` with `text` in a task of its own, for tests that act while it runs.
pub fn prompt_in_background(
    rt: &Runtime,
    id: &SessionId,
    text: &str,
) -> tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>> {
    let (rt, id, input) = (rt.clone(), id.clone(), PromptInput::text(text));
    tokio::spawn(async move { rt.prompt(&id, input).await })
}

/// Waits at most `within` for a prompt started with [`prompt_in_background`] and checks that
/// it answered `Cancelled`; `what` names the wait in the failure.
pub async fn expect_cancelled(
    running: tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
    within: Duration,
    what: &str,
) {
    let result = tokio::time::timeout(within, running)
        .await
        .expect(what)
        .unwrap();
    assert!(matches!(result, Err(RuntimeError::Cancelled)), "{result:?}");
}

fn text_of(message: &MessageWithParts) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.clone()))
        .collect()
}

/// Every tool part of a session's messages.
pub async fn tool_parts(rt: &Runtime, id: &SessionId) -> Vec<(String, ToolState)> {
    rt.messages(id)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_tool().map(|t| (t.tool.clone(), t.state.clone())))
        .collect()
}

/// The child session id named in a task output's `<task_metadata>`.
pub fn child_id_in(body: &str) -> Option<String> {
    let at = body.find("session_id: ses_")? + "session_id: ".len();
    Some(
        body[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect(),
    )
}
