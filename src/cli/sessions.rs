//! `taskforce sessions list|show|tree|compact|delete`.

use clap::Subcommand;
use serde_json::json;
use taskforce_actors::SessionTree;
use taskforce_actors::bus::SessionStatus;
use taskforce_actors::store::SessionFilter;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, PartKind, ToolState};

use super::output::outln;
use super::{Context, UsageError};

/// `taskforce sessions …`
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List this project's sessions, most recently updated first.
    List {
        /// Only root sessions.
        #[arg(long)]
        roots: bool,
        /// Every project's sessions, each with its directory.
        #[arg(long)]
        all: bool,
        /// Print OpenCode Session objects as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's messages.
    Show {
        /// The session id.
        id: String,
        /// Print `{info, messages: [{info, parts}]}` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's subtree with statuses and usage.
    Tree {
        /// The session id.
        id: String,
        /// Print the tree as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Summarize a session's conversation so far (the model then continues from the summary).
    Compact {
        /// The session id.
        id: String,
        /// Print the summary message as `{info, parts}` JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session and its subtree.
    Delete {
        /// The session id.
        id: String,
        /// Print the deleted sessions as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `sessions` subcommand.
pub fn run(context: &Context, command: SessionsCommand) -> anyhow::Result<()> {
    let parse = |id: &str| SessionId::parse(id).map_err(UsageError::new);
    match command {
        SessionsCommand::List { roots, all, json } => {
            context.with_store_runtime(move |rt| async move {
                let sessions = rt
                    .sessions(&SessionFilter {
                        roots,
                        project_id: (!all).then(|| rt.project_id().to_string()),
                        ..Default::default()
                    })
                    .await?;
                if json {
                    outln!("{}", serde_json::to_string_pretty(&sessions)?)?;
                } else if sessions.is_empty() {
                    outln!("no sessions")?;
                } else {
                    for s in sessions {
                        let parent = s
                            .parent_id
                            .as_ref()
                            .map_or(String::new(), |p| format!("  (child of {p})"));
                        let directory = if all {
                            format!("  [{}]", s.directory.display())
                        } else {
                            String::new()
                        };
                        outln!("{}  {}{parent}{directory}", s.id, s.title)?;
                    }
                }
                Ok(())
            })
        }
        SessionsCommand::Show { id, json } => {
            let id = parse(&id)?;
            context.with_store_runtime(move |rt| async move {
                let info = rt.session(&id).await.map_err(UsageError::new)?;
                let messages = rt.messages(&id).await?;
                if json {
                    let out = json!({"info": info, "messages": messages});
                    outln!("{}", serde_json::to_string_pretty(&out)?)?;
                    return Ok(());
                }
                outln!("{}  {}", info.id, info.title)?;
                for m in &messages {
                    let who = match &*m.info {
                        Message::User(u) => format!("user → @{}", u.agent),
                        Message::Assistant(a) => {
                            format!("@{} ({}/{})", a.agent, a.provider_id, a.model_id)
                        }
                    };
                    outln!("\n── {who}")?;
                    for p in &m.parts {
                        match &p.kind {
                            PartKind::Text(t) => outln!("{}", t.text)?,
                            PartKind::Reasoning(r) => outln!("(thinking) {}", r.text)?,
                            PartKind::Tool(t) => {
                                let detail = match &t.state {
                                    ToolState::Completed(c) => c.title.clone(),
                                    ToolState::Error(e) => format!("error: {}", e.error),
                                    other => other.status().to_string(),
                                };
                                outln!("[{}] {detail}", t.tool)?;
                            }
                            _ => {}
                        }
                    }
                    if let Message::Assistant(a) = &*m.info
                        && let Some(e) = &a.error
                    {
                        outln!("error: {}: {}", e.name(), e.message().unwrap_or(""))?;
                    }
                }
                Ok(())
            })
        }
        SessionsCommand::Tree { id, json } => {
            let id = parse(&id)?;
            context.with_store_runtime(move |rt| async move {
                let tree = rt.tree(&id).await.map_err(|e| match e {
                    taskforce_actors::RuntimeError::SessionNotFound(_) => UsageError::new(e).into(),
                    other => anyhow::Error::from(other),
                })?;
                if json {
                    outln!("{}", serde_json::to_string_pretty(&tree)?)?;
                } else {
                    print_tree(&tree, 0)?;
                }
                Ok(())
            })
        }
        SessionsCommand::Compact { id, json } => {
            let id = parse(&id)?;
            context.with_store_runtime(move |rt| async move {
                rt.session(&id).await.map_err(UsageError::new)?;
                let summary = rt.summarize(&id, None).await?;
                if let Some(error) = summary.info.as_assistant().and_then(|a| a.error.as_ref()) {
                    anyhow::bail!(
                        "the summary failed: {}",
                        error.message().unwrap_or(error.name())
                    );
                }
                if json {
                    outln!("{}", serde_json::to_string_pretty(&summary)?)?;
                } else {
                    let text: String = summary
                        .parts
                        .iter()
                        .filter_map(|p| p.as_text())
                        .map(|t| t.text.as_str())
                        .collect();
                    outln!("{text}")?;
                }
                Ok(())
            })
        }
        SessionsCommand::Delete { id, json } => {
            let id = parse(&id)?;
            context.with_store_runtime(move |rt| async move {
                rt.session(&id).await.map_err(UsageError::new)?;
                let deleted = rt.delete_session(&id).await?;
                if json {
                    outln!("{}", serde_json::to_string_pretty(&deleted)?)?;
                } else {
                    outln!("deleted {} session(s)", deleted.len())?;
                }
                Ok(())
            })
        }
    }
}

fn print_tree(node: &SessionTree, depth: usize) -> std::io::Result<()> {
    let status = match &node.status {
        SessionStatus::Idle => "idle",
        SessionStatus::Busy => "busy",
        SessionStatus::Retry { .. } => "retry",
    };
    outln!(
        "{}{}  {}  [{status}{}]  ${:.4} own, ${:.4} total, {} turn(s)",
        "  ".repeat(depth),
        node.info.id,
        node.info.title,
        node.agent
            .as_ref()
            .map_or(String::new(), |a| format!(", @{a}")),
        node.usage.cost,
        node.total_usage.cost,
        node.usage.turns,
    )?;
    for child in &node.children {
        print_tree(child, depth + 1)?;
    }
    Ok(())
}
