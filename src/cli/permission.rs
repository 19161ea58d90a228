//! `taskforce permission explain`: which rule decides a permission, and where it came from.
//!
//! For `bash`, the value is a command line: each command it runs (wrappers peeled, code of
//! `sh -c` and `eval` parsed) is shown with the rule it matched, and the strictest decides.

use clap::Subcommand;
use serde_json::{Value, json};
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::config::mcp_tool_prefix;
use taskforce_agents::permission::bash::{self, PartDecision};
use taskforce_agents::permission::{Action, Rule, permission_for_tool};
use taskforce_agents::skill::SKILL_PERMISSION;
use taskforce_agents::tool::{SEARCH_TOOLS, webfetch_pattern};

use super::Context;
use super::output::outln;

/// `taskforce permission …`
#[derive(Debug, Subcommand)]
pub enum PermissionCommand {
    /// Show the decision for PERMISSION and PATTERN, and the rule that made it.
    Explain {
        /// The permission (`bash`, `edit`, `read`, `task`, `skill`…) or a tool id such as `write`.
        permission: String,
        /// The value asked about: a command line, a path, an agent or skill name, a web address.
        pattern: String,
        /// The agent whose rules decide (default: the default agent).
        #[arg(long)]
        agent: Option<String>,
        /// Print `{"action", "rule"}` (for bash also `"parts"`) as JSON.
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
    if asked == "bash" {
        return explain_bash(agent, &pattern, json);
    }
    // webfetch matches an address in its one normal spelling, as the tool asks for it.
    let given = pattern;
    let pattern = if asked == "webfetch" {
        webfetch_pattern(&given)
    } else {
        given.clone()
    };
    let decision = agent.evaluate(asked, &pattern);
    if json {
        let mut out = json!({"action": decision.action, "rule": decision.rule});
        if pattern != given {
            out["pattern"] = json!(pattern);
        }
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(());
    }
    outln!("{}", decision.action)?;
    outln!("  agent: {}", agent.name)?;
    if asked != permission {
        outln!("  the {permission} tool asks for the `{asked}` permission")?;
    }
    if pattern != given {
        outln!("  the address is checked as {pattern:?}")?;
    }
    match decision.rule {
        Some(rule) => {
            print_rule(agent, rule, "  ")?;
            print_trailer(agent)?;
        }
        None => outln!("  no rule matches `{asked}` {pattern:?}; `ask` is the default")?,
    }
    print_hidden(agent, &permission)?;
    if asked == SKILL_PERMISSION {
        print_unknown_skill(context, &pattern)?;
    }
    if SEARCH_TOOLS.contains(&asked) && !context.loaded.config.search.is_configured() {
        outln!(
            "  the {asked} tool is not offered: no search backend is configured under [search]"
        )?;
    }
    print_mcp(context, agent, &permission)?;
    Ok(())
}

/// Says so when no skill is called `name` (the decision holds for one made later).
fn print_unknown_skill(context: &Context, name: &str) -> std::io::Result<()> {
    let skills = context.registry.skills();
    if skills.get(name).is_some() {
        return Ok(());
    }
    let known: Vec<&str> = skills.list().map(|s| s.name.as_str()).collect();
    let known = if known.is_empty() {
        "none were found".to_string()
    } else {
        format!("found: {}", known.join(", "))
    };
    outln!("  no skill is called {name:?} ({known})")
}

/// Explains a bash command line part by part; the strictest part decides.
fn explain_bash(agent: &AgentInfo, line: &str, json: bool) -> anyhow::Result<()> {
    let parts = bash::explain(line, &[&agent.permission]);
    let action = Action::strictest(parts.iter().map(|p| p.action));
    let decisive = parts.iter().find(|p| p.action == action);
    if json {
        let shown: Vec<Value> = parts
            .iter()
            .map(|p| {
                let mut part = json!({
                    "text": p.part.text,
                    "pattern": p.part.pattern,
                    "action": p.action,
                    "rule": p.rule,
                });
                if let Some(reason) = &p.part.unreadable {
                    part["unreadable"] = json!(reason.to_string());
                }
                part
            })
            .collect();
        let out = json!({
            "action": action,
            "rule": decisive.and_then(|p| p.rule),
            "parts": shown,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(());
    }
    outln!("{action}")?;
    outln!("  agent: {}", agent.name)?;
    if parts.len() > 1 {
        outln!(
            "  the line is checked as {} commands; the strictest decides",
            parts.len()
        )?;
    }
    for part in &parts {
        print_part(agent, part, parts.len() > 1)?;
    }
    if parts.iter().any(|p| p.rule.is_some()) {
        print_trailer(agent)?;
    }
    print_hidden(agent, "bash")?;
    Ok(())
}

fn print_part(agent: &AgentInfo, part: &PartDecision<'_>, several: bool) -> std::io::Result<()> {
    let indent = if several {
        let mut head = format!("  {} {:?}", part.action, part.part.pattern);
        if part.part.text.trim() != part.part.pattern {
            head.push_str(&format!(" (in {:?})", part.part.text.trim()));
        }
        outln!("{head}")?;
        "    "
    } else {
        "  "
    };
    if let Some(reason) = &part.part.unreadable {
        outln!("{indent}cannot be checked: {reason}; asked at least")?;
    }
    match part.rule {
        Some(rule) => print_rule(agent, rule, indent)?,
        None => outln!(
            "{indent}no rule matches `bash` {:?}; `ask` is the default",
            part.part.pattern
        )?,
    }
    Ok(())
}

fn print_rule(agent: &AgentInfo, rule: &Rule, indent: &str) -> std::io::Result<()> {
    let index = agent.index_of(rule);
    let number = index.map_or_else(String::new, |i| format!(" #{}", i + 1));
    outln!(
        "{indent}rule{number}: {} {:?} → {}",
        rule.permission,
        rule.pattern,
        rule.action
    )?;
    if let Some(origin) = index.and_then(|i| agent.origin_of(i)) {
        outln!("{indent}from: {}", origin.describe())?;
    }
    Ok(())
}

fn print_trailer(agent: &AgentInfo) -> std::io::Result<()> {
    outln!(
        "  (the last matching rule wins; `taskforce agents show {}` lists them all)",
        agent.name
    )?;
    Ok(())
}

fn print_hidden(agent: &AgentInfo, permission: &str) -> std::io::Result<()> {
    if agent.disabled_tools.iter().any(|t| t == permission) {
        outln!("  the {permission} tool is hidden from this agent's model")?;
    }
    Ok(())
}

/// When `permission` is named like a configured MCP server's tool: says so, and whether the
/// agent's rules hide it.
fn print_mcp(context: &Context, agent: &AgentInfo, permission: &str) -> std::io::Result<()> {
    let Some(server) = context
        .loaded
        .config
        .mcp
        .keys()
        .find(|name| permission.starts_with(&mcp_tool_prefix(name)))
    else {
        return Ok(());
    };
    outln!(
        "  `{permission}` is named like a tool of MCP server {server}: each call is asked with pattern \"*\""
    )?;
    if !taskforce_agents::permission::disabled([permission], &agent.permission).is_empty() {
        outln!("  the {permission} tool is hidden from this agent's model")?;
    }
    Ok(())
}
