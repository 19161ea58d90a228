//! The run of `run --attach` on the server: follows the server's event stream (opened before
//! the prompt is sent) through the same screen as a local run, answers the tree's permission
//! asks, ends when the root session goes idle after its prompt, and reads the final answer back
//! so that stdout has it whole once. Ctrl-C (or SIGTERM) aborts the session on the server.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::time::Duration;

use taskforce_actors::PromptInput;
use taskforce_actors::bus::{Event, SessionStatus};
use taskforce_actors::store::MessageWithParts;
use taskforce_agents::config::Config;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{AssistantError, Message};

use super::asks;
use super::run::{CANCEL_WAIT, Show, failure, tick, until};
use super::screen::Screen;
use super::signals::{StopSignal, StopSignals};
use super::{ExitStatus, UsageError};
use crate::client::{Client, ClientError, ServerEvent};

/// What the run sends to the server.
pub(super) enum Send {
    /// A prompt, whose user message carries an id chosen here.
    Prompt(PromptInput),
    /// A slash command (the server answers its final message).
    Command {
        name: String,
        arguments: String,
        agent: Option<String>,
        model: Option<String>,
    },
}

/// How many times in a row the event stream may fail to reopen before the run gives up.
const MAX_RECONNECTS: u32 = 5;

/// How long the run waits for the root's `session.idle` event once the end is otherwise known
/// (the root's status went idle, or the server answered the command).
const SETTLE: Duration = Duration::from_millis(500);

/// The sessions of the run's tree: the root and every session created below one of them.
struct Tree {
    members: HashSet<SessionId>,
}

impl Tree {
    /// Whether `event` belongs to the tree (learning the sessions created in it).
    fn passes(&mut self, event: &Event) -> bool {
        if let Event::SessionCreated { info } | Event::SessionUpdated { info } = event
            && info
                .parent_id
                .as_ref()
                .is_some_and(|p| self.members.contains(p))
        {
            self.members.insert(info.id.clone());
        }
        event
            .session_id()
            .is_some_and(|id| self.members.contains(id))
    }
}

/// Where the run stands.
#[derive(Default)]
struct Progress {
    /// Our prompt's user message was stored (its turn began).
    started: bool,
    /// The root's `session.idle` came after the run's turn began.
    idle: bool,
    /// The root's status went idle after the run's turn began (`session.idle` follows).
    idle_status: bool,
    /// The root's last error, when its loop failed.
    error: Option<AssistantError>,
}

impl Progress {
    /// Takes in one event of the root session.
    fn see(&mut self, event: &Event, root: &SessionId, ours: Option<&MessageId>) {
        match event {
            Event::MessageUpdated { info } if Some(info.id()) == ours => self.started = true,
            Event::SessionError {
                session_id: Some(id),
                error,
            } if id == root => {
                self.error = error.as_deref().cloned();
            }
            // A loop that failed before storing our message ends the run too.
            Event::SessionIdle { session_id } if session_id == root && self.ended(ours) => {
                self.idle = true;
            }
            Event::SessionStatus {
                session_id,
                status: SessionStatus::Idle,
            } if session_id == root && self.ended(ours) => self.idle_status = true,
            _ => {}
        }
    }

    /// Whether the root going idle now ends the run.
    fn ended(&self, ours: Option<&MessageId>) -> bool {
        self.started || ours.is_none() || self.error.is_some()
    }
}

/// Sends `send` to `root` on the server and follows the tree (`members` are the sessions known
/// to be in it) until the run ends.
pub(super) async fn drive(
    client: &Client,
    root: &SessionId,
    members: HashSet<SessionId>,
    agent: &str,
    config: &Config,
    send: Send,
    show: Show,
) -> anyhow::Result<()> {
    let mut signals = StopSignals::new()?;
    let mut events = client.events();
    // Subscribed before sending: nothing of the run is missed.
    loop {
        match events.next().await {
            Some(ServerEvent::Connected) => break,
            Some(ServerEvent::Disconnected(cause)) => {
                return Err(ExitStatus::new(
                    2,
                    &format!("cannot follow the events of {}: {cause}", client.base()),
                )
                .into());
            }
            Some(ServerEvent::Event(_)) => {}
            None => anyhow::bail!("the event stream of {} ended", client.base()),
        }
    }
    let mut tree = Tree { members };
    let mut screen = Screen::new(root.clone(), agent, config.clone(), show.format, show.quiet);
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let (ours, mut command) = match send {
        Send::Prompt(input) => {
            client
                .prompt_async(root.as_str(), &input)
                .await
                .map_err(refused)?;
            (input.message_id, None)
        }
        Send::Command {
            name,
            arguments,
            agent,
            model,
        } => {
            let client = client.clone();
            let id = root.to_string();
            let task = tokio::spawn(async move {
                client
                    .command_on(&id, &name, &arguments, agent.as_deref(), model.as_deref())
                    .await
            });
            (None, Some(task))
        }
    };
    let mut progress = Progress::default();
    let mut answered: Option<MessageWithParts> = None;
    let mut settle = None;
    let mut stopped: Option<StopSignal> = None;
    let mut give_up = None;
    let mut failed_reconnects = 0;
    loop {
        if command.is_none() {
            if progress.idle {
                break;
            }
            if progress.idle_status && settle.is_none() {
                settle = Some(tokio::time::Instant::now() + SETTLE);
            }
        }
        tokio::select! {
            item = events.next() => match item {
                Some(ServerEvent::Event(event)) => {
                    if !tree.passes(&event) {
                        continue;
                    }
                    screen.show(&event);
                    if let Event::PermissionAsked(request) = &*event
                        && &request.root_session_id == root
                    {
                        screen.clear();
                        let (reply, message) = asks::decide(request, show.yes, interactive).await;
                        if let Err(e) = client
                            .reply_with(request.id.as_str(), reply, message.as_deref())
                            .await
                        {
                            screen.note(&format!("could not answer a permission ask: {e}"));
                        }
                    }
                    if let Event::QuestionAsked(request) = &*event
                        && &request.root_session_id == root
                    {
                        screen.clear();
                        let answered = match asks::decide_question(request, interactive).await {
                            Some(answers) => client.answer_question(request.id.as_str(), &answers).await,
                            None => client.dismiss_question(request.id.as_str()).await,
                        };
                        if let Err(e) = answered {
                            screen.note(&format!("could not answer a question: {e}"));
                        }
                    }
                    progress.see(&event, root, ours.as_ref());
                }
                Some(ServerEvent::Connected) => failed_reconnects = 0,
                Some(ServerEvent::Disconnected(cause)) => {
                    failed_reconnects += 1;
                    if failed_reconnects > MAX_RECONNECTS {
                        screen.clear();
                        anyhow::bail!("lost the connection to {}: {cause}", client.base());
                    }
                    screen.note(&format!("the event stream dropped ({cause}); reconnecting…"));
                }
                None => anyhow::bail!("the event stream of {} ended", client.base()),
            },
            joined = async {
                match command.as_mut() {
                    Some(task) => task.await,
                    None => std::future::pending().await,
                }
            }, if command.is_some() =>
            {
                command = None;
                match joined {
                    Ok(Ok(message)) => answered = Some(message),
                    Ok(Err(e)) => {
                        screen.clear();
                        return Err(refused(e));
                    }
                    Err(e) => anyhow::bail!("the command crashed: {e}"),
                }
                settle.get_or_insert(tokio::time::Instant::now() + SETTLE);
            }
            // The end is known and `session.idle` did not follow.
            () = until(settle) => break,
            () = tick(screen.animated()) => screen.tick(),
            signal = signals.recv(), if stopped.is_none() => {
                stopped = Some(signal);
                give_up = Some(tokio::time::Instant::now() + CANCEL_WAIT);
                screen.note(&format!("{}: aborting the session on the server…", signal.verb()));
                if let Err(e) = client.abort(root.as_str()).await {
                    screen.note(&format!("could not abort the session: {e}"));
                }
                // An abort ends the run at the root's idle, whether or not our turn began.
                progress.started = true;
                command = None;
            }
            () = until(give_up) => break,
        }
    }
    screen.clear();
    if let Some(signal) = stopped {
        return Err(ExitStatus::new(signal.exit_code(), "").into());
    }
    let message = match (answered, &ours) {
        (Some(message), _) => Some(message),
        (None, Some(ours)) => answer_to(client, root, ours).await?,
        (None, None) => None,
    };
    let Some(message) = message else {
        return Err(match progress.error {
            Some(error) => failure(&error),
            None => ExitStatus::new(1, "the run ended without an answer"),
        }
        .into());
    };
    if let Message::Assistant(a) = &*message.info
        && let Some(error) = &a.error
    {
        return Err(failure(error).into());
    }
    screen.finish(&message);
    Ok(())
}

/// The final answer to the user message `ours`: the last assistant message replying to it.
async fn answer_to(
    client: &Client,
    root: &SessionId,
    ours: &MessageId,
) -> anyhow::Result<Option<MessageWithParts>> {
    let messages = client.messages(root.as_str()).await?;
    Ok(messages
        .into_iter()
        .rev()
        .find(|m| matches!(&*m.info, Message::Assistant(a) if &a.parent_id == ours)))
}

/// A request the server refused: bad usage when it says the request was wrong (4xx).
fn refused(error: ClientError) -> anyhow::Error {
    match &error {
        ClientError::Status { status, .. } if status.is_client_error() => {
            UsageError::new(error).into()
        }
        _ => error.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskforce_agents::model::Session;

    fn created(id: &SessionId, parent: Option<&SessionId>) -> Event {
        let mut info = Session::new("project", "/p", "title", 1);
        info.id = id.clone();
        info.parent_id = parent.cloned();
        Event::SessionCreated {
            info: std::sync::Arc::new(info),
        }
    }

    fn idle(id: &SessionId) -> Event {
        Event::SessionIdle {
            session_id: id.clone(),
        }
    }

    #[test]
    fn the_tree_passes_its_own_sessions_and_their_children_only() {
        let (root, child, grandchild, other) = (
            SessionId::new(),
            SessionId::new(),
            SessionId::new(),
            SessionId::new(),
        );
        let mut tree = Tree {
            members: HashSet::from([root.clone()]),
        };
        assert!(tree.passes(&created(&child, Some(&root))));
        assert!(tree.passes(&created(&grandchild, Some(&child))));
        assert!(tree.passes(&idle(&grandchild)));
        assert!(!tree.passes(&created(&other, None)));
        assert!(!tree.passes(&idle(&other)));
    }

    #[test]
    fn the_root_going_idle_ends_the_run_only_once_its_prompt_began() {
        let root = SessionId::new();
        let ours = MessageId::new();
        let mut progress = Progress::default();
        // The end of an earlier turn of the same session.
        progress.see(&idle(&root), &root, Some(&ours));
        assert!(!progress.idle);
        progress.see(&idle(&SessionId::new()), &root, Some(&ours));
        assert!(!progress.idle);
        let mut user = taskforce_agents::model::UserMessage::new(
            root.clone(),
            "build",
            taskforce_agents::model::ModelRef::new("p", "m"),
            1,
        );
        user.id = ours.clone();
        progress.see(
            &Event::MessageUpdated {
                info: std::sync::Arc::new(Message::User(user)),
            },
            &root,
            Some(&ours),
        );
        assert!(progress.started && !progress.idle);
        progress.see(
            &Event::SessionStatus {
                session_id: root.clone(),
                status: SessionStatus::Idle,
            },
            &root,
            Some(&ours),
        );
        assert!(progress.idle_status && !progress.idle);
        progress.see(&idle(&root), &root, Some(&ours));
        assert!(progress.idle);
    }
}
