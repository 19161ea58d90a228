//! `taskforce run`: prompt a session, show its tree live, print the answer.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use clap::{Args, ValueEnum};
use futures::StreamExt;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_actors::{PartInput, PromptInput, Runtime, RuntimeError};
use taskforce_agents::command::Commands;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, ModelRef};

use super::live::LiveView;
use super::signals::{StopSignal, StopSignals};
use super::{Context, ExitStatus, UsageError};
use crate::cli::output::final_text;

/// How `run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The final answer on stdout, live progress on stderr.
    Text,
    /// One event per line on stdout.
    Json,
}

/// What `run` asks the runtime for.
pub(super) enum Request {
    /// A prompt.
    Prompt(PromptInput),
    /// A slash command.
    Command {
        name: String,
        arguments: String,
        agent: Option<String>,
        model: Option<ModelRef>,
    },
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
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Allow every permission ask without asking.
    #[arg(long)]
    pub yes: bool,
    /// The message.
    #[arg(required = true, trailing_var_arg = true)]
    pub message: Vec<String>,
}

/// Runs `taskforce run`.
pub fn run(context: &Context, args: RunArgs) -> anyhow::Result<()> {
    let model = args
        .model
        .as_deref()
        .map(str::parse::<ModelRef>)
        .transpose()
        .map_err(UsageError::new)?;
    if let Some(agent) = &args.agent {
        context.agent(Some(agent))?;
    }
    let session_id = args
        .session
        .as_deref()
        .map(SessionId::parse)
        .transpose()
        .map_err(UsageError::new)?;
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
    let text = args.message.join(" ");
    let request = match text.strip_prefix('/') {
        // `/name args` runs a command; an unknown name is a usage error listing the known ones.
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {
            let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            Commands::new(&context.loaded.config)
                .get(name)
                .map_err(UsageError::new)?;
            Request::Command {
                name: name.to_string(),
                arguments: arguments.trim().to_string(),
                agent: args.agent.clone(),
                model,
            }
        }
        _ => Request::Prompt(PromptInput {
            agent: args.agent.clone(),
            model,
            ..PromptInput::text(text)
        }),
    };
    let format = args.format;
    let yes = args.yes;
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
        let outcome = drive(&runtime, &session.id, &agent_name, request, format, yes).await;
        if format == Format::Text {
            eprintln!("session: {}", session.id);
            if let Ok(tree) = runtime.tree(&session.id).await {
                eprintln!("{}", usage_line(&tree));
            }
        }
        outcome
    })
}

/// Tokens and cost of the whole tree, for the last line of a run.
fn usage_line(tree: &taskforce_actors::SessionTree) -> String {
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
const CANCEL_WAIT: Duration = Duration::from_millis(1500);

/// Sleeps until `at`, or forever without one.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Cancels the run's tree on a stop signal and says so.
async fn cancel_on(runtime: &Runtime, session: &SessionId, signal: StopSignal) {
    let what = match signal {
        StopSignal::Interrupt => "interrupted",
        StopSignal::Terminate => "terminated",
    };
    eprintln!("{what}: cancelling the session tree…");
    let _ = runtime.cancel(session).await;
}

/// Prompts, follows the events, answers permission asks, and handles SIGINT (Ctrl-C) and
/// SIGTERM: the tree is cancelled and the run exits with 130 or 143.
pub(super) async fn drive(
    runtime: &Runtime,
    session: &SessionId,
    agent: &str,
    request: Request,
    format: Format,
    yes: bool,
) -> anyhow::Result<()> {
    let mut signals = StopSignals::new()?;
    let mut events = runtime.subscribe(Filter::Subtree(session.clone()));
    let mut view = LiveView::new(session.clone(), agent);
    let prompt = {
        let runtime = runtime.clone();
        let session = session.clone();
        tokio::spawn(async move {
            match request {
                Request::Prompt(mut input) => {
                    // `@path` and `@agent` in the text become file and agent parts.
                    if let [PartInput::Text { text, .. }] = input.parts.as_slice() {
                        input.parts = runtime.resolve_prompt(&session, &text.clone()).await?;
                    }
                    runtime.prompt(&session, input).await
                }
                Request::Command {
                    name,
                    arguments,
                    agent,
                    model,
                } => {
                    runtime
                        .command(&session, &name, &arguments, agent.as_deref(), model)
                        .await
                }
            }
        })
    };
    tokio::pin!(prompt);
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut stopped: Option<StopSignal> = None;
    let mut give_up = None;
    let result = loop {
        tokio::select! {
            joined = &mut prompt => break joined,
            item = events.next() => match item {
                Some(BusItem::Event(envelope)) => {
                    handle_event(runtime, &envelope.event, &mut view, format, yes, interactive).await;
                }
                Some(BusItem::Lagged(n)) => tracing::warn!("the live view missed {n} events"),
                None => {}
            },
            signal = signals.recv(), if stopped.is_none() => {
                stopped = Some(signal);
                give_up = Some(tokio::time::Instant::now() + CANCEL_WAIT);
                cancel_on(runtime, session, signal).await;
            }
            // The runtime's stop cancels and records what has not answered by now.
            () = until(give_up) => {
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
                eprintln!(
                    "{} background result(s) could not be delivered yet; `taskforce run --session {session}` or `taskforce serve` delivers them",
                    work.undelivered
                );
                break;
            }
            let waiting = work.running + work.undelivered;
            if !answered_later && format == Format::Text && waiting > 0 {
                eprintln!("waiting for {waiting} background subagent(s)…");
            }
            answered_later = true;
            tokio::select! {
                item = events.next() => {
                    if let Some(BusItem::Event(envelope)) = item {
                        handle_event(runtime, &envelope.event, &mut view, format, yes, interactive).await;
                    }
                }
                () = changes.changed() => {}
                // No progress for a while: look again to give up on the stuck deliveries.
                () = tokio::time::sleep_until(unchanged_since + UNDELIVERED_PATIENCE) => {}
                signal = signals.recv(), if stopped.is_none() => {
                    stopped = Some(signal);
                    cancel_on(runtime, session, signal).await;
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
                    handle_event(runtime, &envelope.event, &mut view, format, yes, interactive).await;
                    if idle { break; }
                }
                _ => break,
            }
        }
    }
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
        return Err(ExitStatus::new(
            1,
            &format!("{}: {}", error.name(), error.message().unwrap_or("")),
        )
        .into());
    }
    if format == Format::Text {
        let text = final_text(&message);
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}")?;
    }
    Ok(())
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

async fn handle_event(
    runtime: &Runtime,
    event: &Event,
    view: &mut LiveView,
    format: Format,
    yes: bool,
    interactive: bool,
) {
    match format {
        Format::Json => {
            if let Ok(line) = serde_json::to_string(event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }
        }
        Format::Text => view.show(event),
    }
    if let Event::PermissionAsked(request) = event {
        let (reply, message) = if yes {
            (PermissionReply::Once, None)
        } else if interactive {
            ask_terminal((**request).clone()).await
        } else {
            (
                PermissionReply::Reject,
                Some(format!(
                    "permission `{}` for {:?} needs approval and this run is not interactive; rerun with --yes to allow it, or allow it in the config",
                    request.permission, request.patterns
                )),
            )
        };
        if reply == PermissionReply::Reject && !interactive && !yes {
            eprintln!(
                "denied: {} (not interactive; pass --yes to allow)",
                describe_ask(request)
            );
        }
        runtime.reply_permission(&request.id, reply, message).await;
    }
}

/// Who asks for what, for people: `build › explore asks: bash "ls"` (the agents from the
/// run's root session down to the asking one, then the permission and its patterns).
fn describe_ask(request: &PermissionRequest) -> String {
    let patterns: Vec<String> = request.patterns.iter().map(|p| format!("{p:?}")).collect();
    let what = format!("{} {}", request.permission, patterns.join(", "));
    if request.path.is_empty() {
        what
    } else {
        format!("{} asks: {what}", request.path.join(" › "))
    }
}

/// Asks on the terminal: once, always, or reject.
async fn ask_terminal(request: PermissionRequest) -> (PermissionReply, Option<String>) {
    tokio::task::spawn_blocking(move || {
        eprint!(
            "{} (allow? [y]es once / [a]lways / [n]o): ",
            describe_ask(&request)
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        match line.trim().to_lowercase().as_str() {
            "y" | "yes" => (PermissionReply::Once, None),
            "a" | "always" => (PermissionReply::Always, None),
            _ => (PermissionReply::Reject, None),
        }
    })
    .await
    .unwrap_or((PermissionReply::Reject, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskforce_agents::id::{PermissionId, SessionId};

    fn request(path: &[&str], patterns: &[&str]) -> PermissionRequest {
        let session = SessionId::new();
        PermissionRequest {
            id: PermissionId::new(),
            session_id: session.clone(),
            permission: "bash".into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            metadata: Default::default(),
            always: Vec::new(),
            tool: None,
            root_session_id: session,
            path: path.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn an_ask_names_the_agents_down_to_the_asker() {
        assert_eq!(
            describe_ask(&request(&["build", "explore"], &["ls"])),
            r#"build › explore asks: bash "ls""#
        );
        assert_eq!(
            describe_ask(&request(&["build"], &["git status", "echo \"hi\""])),
            r#"build asks: bash "git status", "echo \"hi\"""#
        );
        assert_eq!(describe_ask(&request(&[], &["ls"])), r#"bash "ls""#);
    }
}
