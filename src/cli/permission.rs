//! `taskforce permission explain`: which rule decides a permission, and where it came from.

use clap::Subcommand;
use serde_json::json;
use taskforce_agents::permission::permission_for_tool;

use super::Context;

/// `taskforce permission …`
#[derive(Debug, Subcommand)]
pub enum PermissionCommand {
    /// Show the decision for PERMISSION and PATTERN, and the rule that made it.
    Explain {
        /// The permission (`bash`, `edit`, `read`, `task`…) or a tool id such as `write`.
        permission: String,
        /// The value asked about: a command, a path, an agent name.
        pattern: String,
        /// The agent whose rules decide (default: the default agent).
        #[arg(long)]
        agent: Option<String>,
        /// Print `{"action", "rule"}` as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `permission` subcommand.
pub fn run(context: &Context, command: PermissionCommand) -> anyhow::Result<()> {
    let PermissionCommand::Explain {
        permission,
        pattern,
        agent,
        json,
    } = command;
    let agent = context.agent(agent.as_deref())?;
    // Tools of the edit family ask for the `edit` permission.
    let asked = permission_for_tool(&permission);
    let decision = agent.evaluate(asked, &pattern);
    if json {
        let out = json!({"action": decision.action, "rule": decision.rule});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{}", decision.action);
    println!("  agent: {}", agent.name);
    if asked != permission {
        println!("  the {permission} tool asks for the `{asked}` permission");
    }
    match decision.rule {
        Some(rule) => {
            let index = agent.index_of(rule);
            let number = index.map_or_else(String::new, |i| format!(" #{}", i + 1));
            println!(
                "  rule{number}: {} {:?} → {}",
                rule.permission, rule.pattern, rule.action
            );
            if let Some(origin) = index.and_then(|i| agent.origin_of(i)) {
                println!("  from: {}", origin.describe());
            }
            println!(
                "  (the last matching rule wins; `taskforce agents show {}` lists them all)",
                agent.name
            );
        }
        None => println!("  no rule matches `{asked}` {pattern:?}; `ask` is the default"),
    }
    if agent.disabled_tools.iter().any(|t| t == &permission) {
        println!("  the {permission} tool is hidden from this agent's model");
    }
    Ok(())
}
