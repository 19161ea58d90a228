//! `taskforce run`: prompt a session, show its tree live, print the answer.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::{Runtime, RuntimeError, SessionLock};
use taskforce_agents::config::Config;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{AssistantError, Message, ModelRef};

use super::asks;
use super::request::{self, Request};
use super::screen::{Screen, TICK};
use super::signals::{StopSignal, StopSignals};
use super::{Context, ExitStatus, UsageError};

/// How `run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The answer on stdout as it streams, live progress on stderr.
    Text,
    /// One event per line on stdout.
    Json,
}

/// How a run shows itself and answers permission asks.
#[derive(Debug, Clone, Copy)]
pub(super) struct Show {
    /// What stdout carries.
    pub format: Format,
    /// Allow every permission ask.
    pub yes: bool,
    /// No live view on stderr.
    pub quiet: bool,
}

/// `taskforce run` arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent that answers (default: the default agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// The model, as provider/model.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
    /// Continue this session instead of starting a new one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Run on the server at this URL (a running `taskforce serve`, or any OpenCode-compatible
    /// server) instead of a runtime of this process; its password comes from
    /// TASKFORCE_SERVER_PASSWORD. An unreachable server exits with status 2.
    #[arg(long, value_name = "URL")]
    pub attach: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Allow every permission ask without asking.
    #[arg(long)]
    pub yes: bool,
    /// Attach a file (or a directory's listing) to the message; may be repeated.
    #[arg(short = 'f', long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Show no live view on stderr (the answer still streams on stdout).
    #[arg(short, long)]
    pub quiet: bool,
    /// The message (read from stdin when it is left out and stdin is not a terminal).
    #[arg(trailing_var_arg = true)]
    pub message: Vec<String>,
}

impl RunArgs {
    /// `--model`, checked.
    pub(super) fn model(&self) -> Result<Option<ModelRef>, UsageError> {
        self.model
            .as_deref()
            .map(str::parse::<ModelRef>)
            .transpose()
            .map_err(UsageError::new)
    }

    /// `--session`, checked.
    pub(super) fn session(&self) -> Result<Option<SessionId>, UsageError> {
        self.session
            .as_deref()
            .map(SessionId::parse)
            .transpose()
            .map_err(UsageError::new)
    }

    /// How the run shows itself.
    pub(super) fn show(&self) -> Show {
        Show {
            format: self.format,
            yes: self.yes,
            quiet: self.quiet,
        }
    }
}

/// Runs `taskforce run`.
pub fn run(context: &Context, args: RunArgs) -> anyhow::Result<()> {
    let model = args.model()?;
    if let Some(agent) = &args.agent {
        context.agent(Some(agent))?;
    }
    let session_id = args.session()?;
    let agent_name = args
        .agent
        .clone()
        .unwrap_or_else(|| context.registry.default_agent().name.clone());
    let agent_model = context.agent(Some(&agent_name))?.model.is_some();
    // A continued session keeps its own model unless --model names one.
    if model.is_some() || session_id.is_none() {
        context.check_model(model.as_ref(), &agent_name)?;
    }
    if model.is_none()
        && !agent_model
        && session_id.is_none()
        && context.loaded.config.model.is_none()
    {
        return Err(UsageError::new(anyhow::anyhow!(
            "no model configured: pass --model provider/model, or set `model = \"provider/model\"` in taskforce.toml or TASKFORCE_MODEL (try `taskforce demo` for an offline run)"
        ))
        .into());
    }
    let request = request::build(
        request::local_commands(context),
        &args.message,
        &args.files,
        args.agent.clone(),
        model,
    )?;
    let show = args.show();
    let format = show.format;
    let config = context.loaded.config.clone();
    // One run at a time prompts a stored session: another process's run of it goes first.
    let turn = match &session_id {
        Some(id) => Some(wait_turn(&context.loaded.paths.data_dir, id)?),
        None => None,
    };
    // Only this run's own tree gets the background results an earlier runtime left behind:
    // a run that ends must not cut another session's delivery turn.
    context.with_quiet_runtime(move |runtime| async move {
        let session = match session_id {
            Some(id) => {
                let session = runtime.session(&id).await.map_err(UsageError::new)?;
                runtime.deliver_pending(&session.id).await;
                session
            }
            None => runtime.create_session(None, None).await?,
        };
        let outcome = drive(&runtime, &session.id, &agent_name, &config, request, show).await;
        if format == Format::Text {
            eprintln!("session: {}", session.id);
            if let Ok(tree) = runtime.tree(&session.id).await {
                eprintln!("{}", usage_line(&tree));
            }
        }
        drop(turn);
        outcome
    })
}

/// Takes the turn of `session`, saying so on stderr and waiting while another process runs it.
fn wait_turn(data_dir: &std::path::Path, session: &SessionId) -> anyhow::Result<SessionLock> {
    if let Some(turn) = SessionLock::try_acquire(data_dir, session.as_str())? {
        return Ok(turn);
    }
    eprintln!(
        "queued: session {session} is busy (another run is prompting it); waiting for its turn…"
    );
    Ok(SessionLock::acquire(data_dir, session.as_str())?)
}

/// Tokens and cost of the whole tree, for the last line of a run.
pub(super) fn usage_line(tree: &taskforce_actors::SessionTree) -> String {
    fn count(node: &taskforce_actors::SessionTree) -> usize {
        node.children.iter().map(|c| 1 + count(c)).sum()
    }
    let u = &tree.total_usage;
    let children = count(tree);
    format!(
        "usage: {} input, {} output, {} cache read, {} cache write tokens · ${:.4}{}",
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.cost,
        if children == 0 {
            String::new()
        } else {
            format!(
                " (including {children} subagent session{})",
                if children == 1 { "" } else { "s" }
            )
        }
    )
}

/// How long a run waits for background results that ended but make no progress towards their
/// delivery (nothing in the tree runs) before it leaves them to the next runtime.
const UNDELIVERED_PATIENCE: Duration = Duration::from_secs(10);

/// How long a run stopped by a signal waits for its cancelled tree to answer before it leaves
/// the rest to the runtime's stop.
pub(super) const CANCEL_WAIT: Duration = Duration::from_millis(1500);

/// Sleeps until `at`, or forever without one.
pub(super) async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Cancels the run's tree on a stop signal and says so.
async fn cancel_on(
    runtime: &Runtime,
    session: &SessionId,
    signal: StopSignal,
    screen: &mut Screen,
) {
    screen.note(&format!("{}: cancelling the session tree…", signal.verb()));
    let _ = runtime.cancel(session).await;
}

/// Sleeps one tick of the status line, or forever when it is not drawn.
pub(super) async fn tick(animated: bool) {
    if animated {
        tokio::time::sleep(TICK).await;
    } else {
        std::future::pending::<()>().await;
    }
}

/// Prompts, follows the events, answers permission asks, and handles SIGINT (Ctrl-C) and
/// SIGTERM: the tree is cancelled and the run exits with 130 or 143.
pub(super) async fn drive(
    runtime: &Runtime,
    session: &SessionId,
    agent: &str,
    config: &Config,
    request: Request,
    show: Show,
) -> anyhow::Result<()> {
    let mut signals = StopSignals::new()?;
    let mut events = runtime.subscribe(Filter::Subtree(session.clone()));
    let mut screen = Screen::new(
        session.clone(),
        agent,
        config.clone(),
        show.format,
        show.quiet,
    );
    let prompt = {
        let runtime = runtime.clone();
        let session = session.clone();
        tokio::spawn(async move { request.send(&runtime, &session).await })
    };
    tokio::pin!(prompt);
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let handle = async |screen: &mut Screen, event: &Event| {
        screen.show(event);
        if let Event::PermissionAsked(request) = event {
            screen.clear();
            asks::answer(runtime, request, show.yes, interactive).await;
        }
        if let Event::QuestionAsked(request) = event {
            screen.clear();
            asks::answer_question(runtime, request, interactive).await;
        }
    };
    let mut stopped: Option<StopSignal> = None;
    let mut give_up = None;
    let result = loop {
        tokio::select! {
            joined = &mut prompt => break joined,
            item = events.next() => match item {
                Some(BusItem::Event(envelope)) => handle(&mut screen, &envelope.event).await,
                Some(BusItem::Lagged(n)) => tracing::warn!("the live view missed {n} events"),
                None => {}
            },
            () = tick(screen.animated()) => screen.tick(),
            signal = signals.recv(), if stopped.is_none() => {
                stopped = Some(signal);
                give_up = Some(tokio::time::Instant::now() + CANCEL_WAIT);
                cancel_on(runtime, session, signal, &mut screen).await;
            }
            // The runtime's stop cancels and records what has not answered by now.
            () = until(give_up) => {
                screen.clear();
                let code = stopped.map_or(130, StopSignal::exit_code);
                return Err(ExitStatus::new(code, "").into());
            }
        }
    };
    // Background children the run started: wait until their results are delivered and
    // answered, so that the run ends with the tree's last answer instead of taking them down
    // with it (Ctrl-C cancels them with the rest of the tree). Results whose delivery makes no
    // progress for a while (it failed) are left to the next runtime.
    let mut answered_later = false;
    if stopped.is_none() && matches!(&result, Ok(Ok(_))) {
        // Made before the first reading, so that no change between a reading and the wait is
        // missed.
        let mut changes = runtime.watch_work(session);
        let mut last = None;
        let mut unchanged_since = tokio::time::Instant::now();
        loop {
            let work = runtime.pending_work(session).await.unwrap_or_default();
            if work.is_done() {
                break;
            }
            if last != Some(work) {
                last = Some(work);
                unchanged_since = tokio::time::Instant::now();
            } else if !work.busy
                && work.running == 0
                && unchanged_since.elapsed() >= UNDELIVERED_PATIENCE
            {
                screen.note(&format!(
                    "{} background result(s) could not be delivered yet; `taskforce run --session {session}` or `taskforce serve` delivers them",
                    work.undelivered
                ));
                break;
            }
            let waiting = work.running + work.undelivered;
            if !answered_later && show.format == Format::Text && !show.quiet && waiting > 0 {
                screen.note(&format!("waiting for {waiting} background subagent(s)…"));
            }
            answered_later = true;
            tokio::select! {
                item = events.next() => {
                    if let Some(BusItem::Event(envelope)) = item {
                        handle(&mut screen, &envelope.event).await;
                    }
                }
                () = changes.changed() => {}
                () = tick(screen.animated()) => screen.tick(),
                // No progress for a while: look again to give up on the stuck deliveries.
                () = tokio::time::sleep_until(unchanged_since + UNDELIVERED_PATIENCE) => {}
                signal = signals.recv(), if stopped.is_none() => {
                    stopped = Some(signal);
                    cancel_on(runtime, session, signal, &mut screen).await;
                    break;
                }
            }
        }
    }
    let result = match result {
        Ok(Ok(first)) if answered_later => {
            Ok(Ok(last_answer(runtime, session).await.unwrap_or(first)))
        }
        other => other,
    };
    // Let the last events of the tree reach the output.
    let settle = tokio::time::sleep(Duration::from_millis(300));
    tokio::pin!(settle);
    loop {
        tokio::select! {
            () = &mut settle => break,
            item = events.next() => match item {
                Some(BusItem::Event(envelope)) => {
                    let idle = matches!(&envelope.event, Event::SessionIdle { session_id } if session_id == session);
                    handle(&mut screen, &envelope.event).await;
                    if idle { break; }
                }
                _ => break,
            }
        }
    }
    screen.clear();
    if let Some(signal) = stopped {
        return Err(ExitStatus::new(signal.exit_code(), "").into());
    }
    let message = match result {
        Ok(Ok(message)) => message,
        Ok(Err(RuntimeError::Cancelled)) => return Err(ExitStatus::new(130, "").into()),
        Ok(Err(e)) => return Err(e.into()),
        Err(e) => anyhow::bail!("the run crashed: {e}"),
    };
    if let Message::Assistant(a) = &*message.info
        && let Some(error) = &a.error
    {
        return Err(failure(error).into());
    }
    screen.finish(&message);
    Ok(())
}

/// The exit of a run whose answer ended in `error`: status 1 with the error's name and message.
pub(super) fn failure(error: &AssistantError) -> ExitStatus {
    ExitStatus::new(
        1,
        &format!("{}: {}", error.name(), error.message().unwrap_or("")),
    )
}

/// The session's newest assistant message, as stored.
async fn last_answer(
    runtime: &Runtime,
    session: &SessionId,
) -> Option<taskforce_actors::store::MessageWithParts> {
    let messages = runtime.messages(session).await.ok()?;
    messages
        .into_iter()
        .rev()
        .find(|m| matches!(*m.info, Message::Assistant(_)))
}
