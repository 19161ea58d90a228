//! The context of one tool call and the services the runtime provides to tools.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::ToolError;
use super::background::ChildReport;
use super::envelope::{DisplayItem, TaskError, TaskUsage, TimeoutReason};
use crate::agent::{AgentInfo, Registry};
use crate::id::{MessageId, SessionId};
use crate::model::{ModelRef, SummaryItem, Todo, ToolMetadata};
use crate::permission::{AskDecision, PermissionAsk, PermissionError};
use crate::question::{QuestionAnswer, QuestionError, QuestionInfo};

/// Where and for whom a tool call runs.
#[derive(Clone)]
pub struct ToolContext {
    /// The session the call belongs to.
    pub session_id: SessionId,
    /// The assistant message that made the call.
    pub message_id: MessageId,
    /// The provider's call id.
    pub call_id: String,
    /// The agent running the session.
    pub agent: Arc<AgentInfo>,
    /// The model of the calling assistant message.
    pub model: ModelRef,
    /// The session's working directory; relative paths resolve here.
    pub directory: PathBuf,
    /// The project root; paths outside it need `external_directory`.
    pub project_root: PathBuf,
    /// The data directory (tool-output files live below it).
    pub data_dir: PathBuf,
    /// The user's home directory, when known (shortened to `~` in subagent output).
    pub home: Option<PathBuf>,
    /// Cancelled when the call must stop.
    pub abort: CancellationToken,
    /// Skip the task tool's permission ask (command subtasks and `@agent` mentions).
    pub bypass_agent_check: bool,
    /// The model a delegated task must run on, over the subagent's own (a command's subtask).
    pub subtask_model: Option<ModelRef>,
    /// Every agent of the runtime.
    pub registry: Arc<Registry>,
    /// Permission asks, live metadata and todos.
    pub host: Arc<dyn ToolHost>,
    /// Starts subagents; `None` where the runtime offers no delegation.
    pub delegate: Option<Arc<dyn Delegate>>,
}

impl ToolContext {
    /// Asks the runtime for `ask`; resolves when allowed.
    pub async fn ask(&self, ask: PermissionAsk) -> Result<(), ToolError> {
        self.host.ask(self, ask).await.map_err(ToolError::from)
    }

    /// What the session's rules (and standing approvals) say about `ask`, without asking anyone.
    pub fn check(&self, ask: &PermissionAsk) -> AskDecision {
        self.host.check(self, ask)
    }

    /// Updates the running tool part's title and metadata.
    pub fn metadata(&self, title: Option<String>, metadata: impl Into<ToolMetadata>) {
        self.host.set_metadata(self, title, metadata.into());
    }

    /// Writes the running tool part as it is now to the store, without waiting: for a call
    /// that will last, so that a crash leaves it on disk (as interrupted) with what it named.
    pub fn store_running(&self) {
        self.host.store_running(self);
    }
}

/// Services the runtime provides to tools.
#[async_trait]
pub trait ToolHost: Send + Sync {
    /// Evaluates the ask against the session's rules; waits for the user when the answer is `ask`.
    async fn ask(&self, ctx: &ToolContext, ask: PermissionAsk) -> Result<(), PermissionError>;

    /// What the session's rules and standing approvals say about `ask`, without waiting for
    /// anyone: search tools use it to leave out files a read would be refused or asked about.
    /// A host that cannot tell answers `Ask`, so that such files are left out.
    fn check(&self, _ctx: &ToolContext, _ask: &PermissionAsk) -> AskDecision {
        AskDecision::Ask
    }

    /// Publishes a new title and metadata on the running tool part.
    fn set_metadata(&self, ctx: &ToolContext, title: Option<String>, metadata: ToolMetadata);

    /// Writes the running tool part as it is now to the store, without waiting (a host that
    /// stores nothing does nothing).
    fn store_running(&self, _ctx: &ToolContext) {}

    /// The session's todo list.
    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, ToolError>;

    /// Replaces the session's todo list (and publishes `todo.updated`).
    async fn set_todos(&self, session: &SessionId, todos: Vec<Todo>) -> Result<(), ToolError>;

    /// Asks the user `questions` and waits for the answers, one per question. A host that
    /// cannot reach anybody says so.
    async fn question(
        &self,
        _ctx: &ToolContext,
        _questions: Vec<QuestionInfo>,
    ) -> Result<Vec<QuestionAnswer>, QuestionError> {
        Err(QuestionError::Unavailable(
            "questions cannot be asked here: nobody is there to answer".into(),
        ))
    }
}

/// A request to run a subagent, from the task tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentRequest {
    /// A short (3-5 words) description of the task.
    pub description: String,
    /// The task for the agent.
    pub prompt: String,
    /// The subagent's name (already checked to exist).
    pub agent: String,
    /// An existing child session to continue.
    pub session_id: Option<String>,
    /// The command that triggered the task, if any.
    pub command: Option<String>,
    /// The model the child runs on (the subagent's own, else the caller's).
    pub model: ModelRef,
    /// The call's own cap on the run; it only lowers `subagent.timeout`.
    pub timeout: Option<Duration>,
}

/// How a child's run ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SubagentStatus {
    /// The child finished its answer.
    #[default]
    Completed,
    /// The run failed (model, provider or runtime error); the message says why.
    Failed(String),
    /// The child was cancelled.
    Cancelled,
    /// The child ran past a time limit and was cancelled with its subtree.
    TimedOut {
        /// Which limit.
        reason: TimeoutReason,
        /// How long that limit was.
        after: Duration,
    },
}

/// What a subagent run returns once its child session exists (however the run ended).
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentOutcome {
    /// The child session.
    pub session_id: SessionId,
    /// The last text of the child's final assistant message (partial when the run failed).
    pub text: String,
    /// The model the child ran on.
    pub model: ModelRef,
    /// The child's tool calls: `[{id, tool, state: {status, title?}}]`.
    pub summary: Vec<SummaryItem>,
    /// How the run ended.
    pub status: SubagentStatus,
    /// The child's own tokens, cost and assistant messages over this run.
    pub usage: TaskUsage,
    /// The child's texts and tool calls over this run, for rich rendering.
    pub display_items: Vec<DisplayItem>,
}

impl SubagentOutcome {
    /// A completed run answering `text`, with no usage or display items recorded.
    pub fn completed(session_id: SessionId, text: impl Into<String>, model: ModelRef) -> Self {
        SubagentOutcome {
            session_id,
            text: text.into(),
            model,
            summary: Vec::new(),
            status: SubagentStatus::Completed,
            usage: TaskUsage::default(),
            display_items: Vec::new(),
        }
    }
}

/// Runs subagents in child sessions; implemented by the runtime (the supervisor).
#[async_trait]
pub trait Delegate: Send + Sync {
    /// Whether `ctx`'s session may start a subagent at all (subagents enabled, depth below the
    /// limit); checked before anything else. The error carries the code to report.
    async fn admit(&self, _ctx: &ToolContext) -> Result<(), TaskError> {
        Ok(())
    }

    /// Runs the child to its end; cancelling `ctx.abort` cancels the child. `Err` only when no
    /// child could be started or resumed; a child that ran answers `Ok` with its status.
    async fn run_subagent(
        &self,
        ctx: &ToolContext,
        request: SubagentRequest,
    ) -> Result<SubagentOutcome, ToolError>;

    /// Starts the child and returns its session id at once, without waiting for it; its result
    /// is delivered into the calling session later (see [`super::background`]).
    async fn start_background(
        &self,
        _ctx: &ToolContext,
        _request: SubagentRequest,
    ) -> Result<SessionId, ToolError> {
        Err(ToolError::Failed(
            "background subagents are not available here".into(),
        ))
    }

    /// Where `child` stands; an error unless the calling session started it (or an ancestor of
    /// it).
    async fn task_status(
        &self,
        _ctx: &ToolContext,
        _child: &SessionId,
    ) -> Result<ChildReport, ToolError> {
        Err(ToolError::Failed(
            "task_status is not available here".into(),
        ))
    }

    /// Cancels `child` and its subtree; same ownership rule as [`Delegate::task_status`].
    async fn task_cancel(
        &self,
        _ctx: &ToolContext,
        _child: &SessionId,
    ) -> Result<ChildReport, ToolError> {
        Err(ToolError::Failed(
            "task_cancel is not available here".into(),
        ))
    }
}
