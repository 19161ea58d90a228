//! CommandInfo and the set of known commands.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::{CommandConfig, builtin_commands, hints};
use crate::config::Config;
use crate::model::ModelRef;

/// Where a command was defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum CommandSource {
    /// Built in, config or markdown (OpenCode lists built-ins as `command` too).
    Command,
}

/// A resolved command in OpenCode's `Command.Info` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// The built-in commands, then those defined in `config` (config tables and markdown
    /// files); a defined command named like a built-in replaces it in place.
    pub fn new(config: &Config) -> Self {
        let mut commands: IndexMap<String, CommandInfo> = builtin_commands()
            .iter()
            .map(|(name, c)| (name.to_string(), CommandInfo::from_config(name, c)))
            .collect();
        for (name, c) in &config.command {
            commands.insert(name.clone(), CommandInfo::from_config(name, c));
        }
        Commands { commands }
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
    use crate::command::builtin::{REVIEW_DESCRIPTION, REVIEW_TEMPLATE};

    fn names(commands: &Commands) -> Vec<&str> {
        commands.list().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn builtins_come_first() {
        let mut config = Config::default();
        config.command.insert(
            "greet".into(),
            CommandConfig {
                template: "Say hello to $1".into(),
                ..Default::default()
            },
        );
        let commands = Commands::new(&config);
        assert_eq!(names(&commands), ["review", "init", "greet"]);
        let review = commands.get("review").unwrap();
        assert_eq!(review.source, CommandSource::Command);
        assert_eq!(review.subtask, Some(true));
        assert_eq!(review.description.as_deref(), Some(REVIEW_DESCRIPTION));
        assert_eq!(review.hints, ["$ARGUMENTS"]);
        let json = serde_json::to_value(review).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "review", "description": REVIEW_DESCRIPTION,
                               "source": "command", "template": REVIEW_TEMPLATE,
                               "subtask": true, "hints": ["$ARGUMENTS"]})
        );
        assert_eq!(
            names(&Commands::new(&Config::default())),
            ["review", "init"]
        );
    }

    #[test]
    fn a_config_command_replaces_a_builtin_in_place() {
        let mut config = Config::default();
        config.command.insert(
            "fix".into(),
            CommandConfig {
                template: "Fix $ARGUMENTS".into(),
                ..Default::default()
            },
        );
        config.command.insert(
            "review".into(),
            CommandConfig {
                template: "Review $1".into(),
                subtask: Some(false),
                ..Default::default()
            },
        );
        let commands = Commands::new(&config);
        assert_eq!(names(&commands), ["review", "init", "fix"]);
        let info = commands.get("review").unwrap();
        assert_eq!(info.hints, ["$1"]);
        let json = serde_json::to_value(info).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "review", "source": "command", "template": "Review $1",
                               "subtask": false, "hints": ["$1"]})
        );
    }

    #[test]
    fn unknown_command_lists_known_ones() {
        let mut config = Config::default();
        config.command.insert(
            "greet".into(),
            CommandConfig {
                template: "Hi".into(),
                ..Default::default()
            },
        );
        let err = Commands::new(&config).get("reveiw").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown command \"/reveiw\"; known commands: review, init, greet"
        );
        let empty = Commands::default();
        assert_eq!(
            empty.get("x").unwrap_err().to_string(),
            "unknown command \"/x\"; no commands are defined"
        );
    }
}
