//! `taskforce commands list`.

use clap::Subcommand;
use taskforce_agents::command::Commands;

use super::Context;
use super::output::outln;

/// `taskforce commands …`
#[derive(Debug, Subcommand)]
pub enum CommandsCommand {
    /// List the slash commands: built-in, then from config and markdown.
    List {
        /// Print OpenCode's command objects as a JSON array.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `commands` subcommand.
pub fn run(context: &Context, command: CommandsCommand) -> anyhow::Result<()> {
    let CommandsCommand::List { json } = command;
    let commands = Commands::new(&context.loaded.config);
    if json {
        let all: Vec<_> = commands.list().collect();
        outln!("{}", serde_json::to_string_pretty(&all)?)?;
        return Ok(());
    }
    let rows: Vec<[String; 3]> = commands
        .list()
        .map(|c| {
            let how = match c.subtask {
                Some(true) => "subtask".to_string(),
                Some(false) => "inline".to_string(),
                None => "by agent".to_string(),
            };
            let agent = c
                .agent
                .as_deref()
                .map_or(String::new(), |a| format!(" @{a}"));
            [
                format!("/{}", c.name),
                format!("{how}{agent}"),
                c.description.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if rows.is_empty() {
        outln!("no commands")?;
        return Ok(());
    }
    let w0 = rows.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].chars().count()).max().unwrap_or(0);
    for r in rows {
        let line = format!("{:w0$}  {:w1$}  {}", r[0], r[1], r[2]);
        outln!("{}", line.trim_end())?;
    }
    Ok(())
}
