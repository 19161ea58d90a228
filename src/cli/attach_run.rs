//! `taskforce run --attach URL`: one message run on a running server (`taskforce serve`, or any
//! OpenCode-compatible server) instead of a runtime of this process, so that scripts share one
//! long-running runtime. It prints as the local run does (see `attach_drive`).
//!
//! Exit status: as the local run; an unreachable server, a refused password, an unknown
//! `--session`, agent or command are bad usage (2).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::Value;
use taskforce_actors::{PartInput, PromptInput, prompt_parts};
use taskforce_agents::command::UnknownCommand;
use taskforce_agents::config::Config;
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::Session;

use super::attach_drive::{self, Send};
use super::request::{self, Request};
use super::run::{Format, RunArgs, usage_line};
use super::tui::server_client;
use super::{Context, ExitStatus, UsageError};
use crate::client::{Client, ClientError};

/// What the server offers, read before anything is sent.
struct Offer {
    /// The agents' names, the default agent first.
    agents: Vec<String>,
    /// The slash commands' names.
    commands: Vec<String>,
}

/// Runs `taskforce run --attach URL`; `context` is the local configuration when it loads (only
/// the retry limits of the live view come from it).
pub fn run(context: Option<&Context>, url: &str, args: RunArgs) -> anyhow::Result<()> {
    let model = args.model()?;
    let session = args.session()?;
    let client = server_client(url).map_err(UsageError::new)?;
    let config = context.map_or_else(Config::default, |c| c.loaded.config.clone());
    let show = args.show();
    let home = context
        .and_then(|c| c.loaded.paths.home.clone())
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let offer = tokio.block_on(offer(&client))?;
    if let Some(agent) = &args.agent
        && !offer.agents.contains(agent)
    {
        return Err(UsageError::new(anyhow::anyhow!(
            "unknown agent \"{agent}\" on {}; it has: {}",
            client.base(),
            offer.agents.join(", ")
        ))
        .into());
    }
    // Read after the server answered: a message on stdin is not lost to an unreachable URL.
    let request = request::build(
        |name| {
            if offer.commands.iter().any(|c| c == name) {
                Ok(())
            } else {
                Err(UnknownCommand {
                    name: name.to_string(),
                    known: offer.commands.clone(),
                })
            }
        },
        &args.message,
        &args.files,
        args.agent.clone(),
        model,
    )?;
    tokio.block_on(async move {
        let (root, agent) = match &session {
            Some(id) => {
                let tree = client.tree(id.as_str()).await.map_err(|e| match e {
                    ClientError::Status { status, .. }
                        if status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST =>
                    {
                        UsageError::new(anyhow::anyhow!("no session {id} on {}", client.base()))
                            .into()
                    }
                    other => anyhow::Error::from(other),
                })?;
                (id.clone(), args.agent.clone().or(tree.agent))
            }
            None => {
                let created = client.create_session(None).await?;
                (created.id, args.agent.clone())
            }
        };
        let agent = agent
            .or_else(|| offer.agents.first().cloned())
            .unwrap_or_else(|| "build".to_string());
        let members = match &session {
            Some(_) => descendants(&client.sessions().await.unwrap_or_default(), &root),
            None => HashSet::from([root.clone()]),
        };
        let send = send_of(request, &offer, home.as_deref()).await?;
        let outcome =
            attach_drive::drive(&client, &root, members, &agent, &config, send, show).await;
        if show.format == Format::Text {
            eprintln!("session: {root}");
            if let Ok(tree) = client.tree(root.as_str()).await {
                eprintln!("{}", usage_line(&tree));
            }
        }
        outcome
    })
}

/// Reads the server's agents and commands; a server that cannot be reached, or that refuses
/// the password, is bad usage naming the URL.
async fn offer(client: &Client) -> anyhow::Result<Offer> {
    let base = client.base();
    client.health().await.map_err(|e| match e {
        ClientError::Unreachable { cause, .. } => ExitStatus::new(
            2,
            &format!(
                "no server answers at {base} ({}); start one with `taskforce serve`, or check the URL",
                // The innermost cause says it best (`Connection refused`).
                cause.rsplit(": ").next().unwrap_or(&cause)
            ),
        ),
        ClientError::Status { status, .. } if status == StatusCode::UNAUTHORIZED => {
            ExitStatus::new(
                2,
                &format!(
                    "the server at {base} refused the password; set TASKFORCE_SERVER_PASSWORD to its password"
                ),
            )
        }
        other => ExitStatus::new(2, &format!("{base} is not a taskforce server: {other}")),
    })?;
    let names = |list: Vec<Value>| -> Vec<String> {
        list.iter()
            .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    Ok(Offer {
        agents: names(client.agents().await?),
        commands: names(client.commands().await?),
    })
}

/// What goes to the server: a prompt (with `@path` references and the attached files read here,
/// from this directory, and an id of our own for its user message, to know its answer), or a
/// command.
async fn send_of(request: Request, offer: &Offer, home: Option<&Path>) -> anyhow::Result<Send> {
    match request {
        Request::Prompt { mut input, files } => {
            let cwd = std::env::current_dir()?;
            if let [PartInput::Text { text, .. }] = input.parts.as_slice() {
                let text = text.clone();
                input.parts = prompt_parts(&text, &cwd, home, |name| {
                    offer.agents.iter().any(|a| a == name)
                })
                .await;
            }
            request::attach_files(&mut input, &files, &cwd).await;
            let id = MessageId::new();
            Ok(Send::Prompt(PromptInput {
                message_id: Some(id),
                ..input
            }))
        }
        Request::Command {
            name,
            arguments,
            agent,
            model,
        } => Ok(Send::Command {
            name,
            arguments,
            agent,
            model: model.map(|m| m.to_string()),
        }),
    }
}

/// `root` and every session below it among `sessions`.
fn descendants(sessions: &[Session], root: &SessionId) -> HashSet<SessionId> {
    let mut children: HashMap<&SessionId, Vec<&SessionId>> = HashMap::new();
    for session in sessions {
        if let Some(parent) = &session.parent_id {
            children.entry(parent).or_default().push(&session.id);
        }
    }
    let mut members = HashSet::from([root.clone()]);
    let mut pending = vec![root];
    while let Some(id) = pending.pop() {
        for child in children.get(id).into_iter().flatten() {
            if members.insert((*child).clone()) {
                pending.push(child);
            }
        }
    }
    members
}
