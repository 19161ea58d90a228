//! CommandInfo and the set of known commands.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::{CommandConfig, hints};
use crate::config::Config;
use crate::model::ModelRef;

/// Where a command was defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandSource {
    /// Config or markdown.
    Command,
}

/// A resolved command in OpenCode's `Command.Info` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandInfo {
    /// The name typed after `/`.
    pub name: String,
    /// What the command does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The agent that runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model that runs it, as `provider/model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Where it was defined.
    pub source: CommandSource,
    /// The prompt template.
    pub template: String,
    /// Whether it runs as a subtask (`None`: decided by the agent's mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtask: Option<bool>,
    /// The placeholders the template uses (`$1`, `$ARGUMENTS`…).
    pub hints: Vec<String>,
}

impl CommandInfo {
    /// A command from its config form.
    pub fn from_config(name: &str, config: &CommandConfig) -> Self {
        CommandInfo {
            name: name.to_string(),
            description: config.description.clone(),
            agent: config.agent.clone(),
            model: config.model.as_ref().map(ModelRef::to_string),
            source: CommandSource::Command,
            template: config.template.clone(),
            subtask: config.subtask,
            hints: hints(&config.template),
        }
    }
}

/// The error for a command name nobody defined; lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown command \"/{name}\"; {}", known_list(.known))]
pub struct UnknownCommand {
    /// The name asked for.
    pub name: String,
    /// The names that exist.
    pub known: Vec<String>,
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "no commands are defined".to_string()
    } else {
        format!("known commands: {}", known.join(", "))
    }
}

/// Every command of a configuration, in definition order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Commands {
    commands: IndexMap<String, CommandInfo>,
}

impl Commands {
    /// The commands defined in `config` (config tables and markdown files).
    pub fn new(config: &Config) -> Self {
        Commands {
            commands: config
                .command
                .iter()
                .map(|(name, c)| (name.clone(), CommandInfo::from_config(name, c)))
                .collect(),
        }
    }

    /// The command called `name` (without the leading `/`).
    pub fn get(&self, name: &str) -> Result<&CommandInfo, UnknownCommand> {
        self.commands.get(name).ok_or_else(|| UnknownCommand {
            name: name.to_string(),
            known: self.commands.keys().cloned().collect(),
        })
    }

    /// Every command, in definition order.
    pub fn list(&self) -> impl Iterator<Item = &CommandInfo> {
        self.commands.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_command_lists_known_ones() {
        let mut config = Config::default();
        config.command.insert(
            "review".into(),
            CommandConfig {
                template: "Review $1".into(),
                subtask: Some(true),
                ..Default::default()
            },
        );
        let commands = Commands::new(&config);
        let info = commands.get("review").unwrap();
        assert_eq!(info.hints, ["$1"]);
        let err = commands.get("reveiw").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown command \"/reveiw\"; known commands: review"
        );
        let json = serde_json::to_value(info).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "review", "source": "command", "template": "Review $1",
                               "subtask": true, "hints": ["$1"]})
        );
    }
}
