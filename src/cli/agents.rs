//! `taskforce agents list|show|create`.

use clap::Subcommand;
use taskforce_agents::agent::AgentInfo;
use taskforce_agents::config::mcp_tool_prefix;
use taskforce_agents::permission::Action;
use taskforce_agents::tool::SEARCH_TOOLS;

use super::output::{out, outln};
use super::{Context, UsageError};

/// `taskforce agents …`
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List every agent, the default first.
    List {
        /// Print OpenCode's agent objects as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show one agent in full.
    Show {
        /// The agent's name.
        name: String,
        /// Print OpenCode's agent object as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Have the model design a subagent and write it to `.taskforce/agent/<name>.md`.
    Create {
        /// What the agent should do.
        #[arg(required = true, trailing_var_arg = true)]
        description: Vec<String>,
        /// The model that designs it (`provider/model`); the configured default otherwise.
        #[arg(long)]
        model: Option<String>,
        /// Print `{identifier, whenToUse, systemPrompt, path}` as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an `agents` subcommand.
pub fn run(context: &Context, command: AgentsCommand) -> anyhow::Result<()> {
    match command {
        AgentsCommand::Create {
            description,
            model,
            json,
        } => create(context, &description.join(" "), model.as_deref(), json)?,
        AgentsCommand::List { json: true } => {
            let agents: Vec<&AgentInfo> = context.registry.list().collect();
            outln!("{}", serde_json::to_string_pretty(&agents)?)?;
        }
        AgentsCommand::List { json: false } => out!("{}", list_table(context))?,
        AgentsCommand::Show { name, json } => {
            let agent = context.agent(Some(&name))?;
            if json {
                outln!("{}", serde_json::to_string_pretty(agent)?)?;
            } else {
                out!("{}", show_text(context, agent))?;
            }
        }
    }
    Ok(())
}

/// One line per agent: name, mode, model, description.
fn list_table(context: &Context) -> String {
    let default = &context.registry.default_agent().name;
    let rows: Vec<[String; 4]> = context
        .registry
        .list()
        .map(|a| {
            let mut name = a.name.clone();
            if &a.name == default {
                name.push_str(" (default)");
            }
            if a.hidden {
                name.push_str(" (hidden)");
            }
            let model = a
                .model
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_else(|| "-".into());
            let description = first_line(a.description.as_deref().unwrap_or(""), 72);
            [name, a.mode.to_string(), model, description]
        })
        .collect();
    let header = ["NAME", "MODE", "MODEL", "DESCRIPTION"].map(String::from);
    let widths: Vec<usize> = (0..3)
        .map(|i| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Everything about one agent, for people.
fn show_text(context: &Context, agent: &AgentInfo) -> String {
    let mut out = String::new();
    let kind = if agent.native { "built-in" } else { "custom" };
    let default = if context.registry.default_agent().name == agent.name {
        ", default"
    } else {
        ""
    };
    let hidden = if agent.hidden { ", hidden" } else { "" };
    out.push_str(&format!("name: {}\n", agent.name));
    out.push_str(&format!("mode: {} ({kind}{default}{hidden})\n", agent.mode));
    if let Some(d) = &agent.description {
        out.push_str(&format!("description: {d}\n"));
    }
    let model = agent.model.as_ref().map_or_else(
        || "the caller's model (or the default model)".to_string(),
        ToString::to_string,
    );
    out.push_str(&format!("model: {model}\n"));
    if let Some(v) = &agent.variant {
        out.push_str(&format!("variant: {v}\n"));
    }
    if let Some(t) = agent.temperature {
        out.push_str(&format!("temperature: {t}\n"));
    }
    if let Some(t) = agent.top_p {
        out.push_str(&format!("top_p: {t}\n"));
    }
    let steps = agent
        .steps
        .map_or_else(|| "unlimited".to_string(), |s| s.to_string());
    out.push_str(&format!("steps: {steps}\n"));
    if !agent.options.is_empty() {
        out.push_str(&format!(
            "options: {}\n",
            serde_json::Value::Object(agent.options.clone())
        ));
    }
    let hidden_tools = if agent.disabled_tools.is_empty() {
        "none".to_string()
    } else {
        agent.disabled_tools.join(", ")
    };
    out.push_str(&format!("tools hidden from the model: {hidden_tools}\n"));
    out.push_str(&skills_line(context, agent));
    if let Some(line) = search_line(context, agent) {
        out.push_str(&line);
    }
    out.push_str(&mcp_lines(context, agent));
    out.push_str("permission (evaluated bottom-up: the last matching rule wins):\n");
    let pw = agent
        .permission
        .iter()
        .map(|r| r.permission.len())
        .max()
        .unwrap_or(0);
    let qw = agent
        .permission
        .iter()
        .map(|r| r.pattern.chars().count() + 2)
        .max()
        .unwrap_or(0);
    for (i, rule) in agent.permission.iter().enumerate() {
        let origin = agent.origin_of(i).map_or("", |o| o.describe());
        out.push_str(&format!(
            "  {:>3}. {:pw$}  {:qw$}  {:5}  {origin}\n",
            i + 1,
            rule.permission,
            format!("{:?}", rule.pattern),
            rule.action.as_str(),
        ));
    }
    if let Some(p) = &agent.prompt {
        out.push_str("prompt:\n");
        for line in p.lines() {
            out.push_str(&format!("  {line}\n").replace("  \n", "\n"));
        }
    }
    out
}

/// The skills the agent may load with the skill tool, and those its rules deny.
fn skills_line(context: &Context, agent: &AgentInfo) -> String {
    let skills = context.registry.skills();
    if skills.is_empty() {
        return "skills: none found\n".into();
    }
    if agent.disabled_tools.iter().any(|t| t == "skill") {
        return "skills: none (the skill tool is hidden from the model)\n".into();
    }
    let (denied, offered): (Vec<&str>, Vec<&str>) = skills
        .list()
        .map(|s| s.name.as_str())
        .partition(|name| agent.evaluate("skill", name).action == Action::Deny);
    let mut line = format!(
        "skills: {}",
        if offered.is_empty() {
            "none".to_string()
        } else {
            offered.join(", ")
        }
    );
    if !denied.is_empty() {
        line.push_str(&format!(" (denied: {})", denied.join(", ")));
    }
    line.push('\n');
    line
}

/// Whether the agent's search tools are offered: they need a `[search]` backend.
fn search_line(context: &Context, agent: &AgentInfo) -> Option<String> {
    let shown: Vec<&str> = SEARCH_TOOLS
        .iter()
        .copied()
        .filter(|t| !agent.disabled_tools.iter().any(|d| d == t))
        .collect();
    if shown.is_empty() {
        return None;
    }
    let search = &context.loaded.config.search;
    let state = match search.engine {
        Some(engine) => format!("answered by the {} backend of [search]", engine.name()),
        None => "not offered, as no search backend is configured under [search]".to_string(),
    };
    Some(format!("search tools ({}): {state}\n", shown.join(", ")))
}

/// One line per configured MCP server: the name pattern of its tools and what this agent's
/// rules say about them (the tools themselves are known once the server runs).
fn mcp_lines(context: &Context, agent: &AgentInfo) -> String {
    let servers = &context.loaded.config.mcp;
    if servers.is_empty() {
        return String::new();
    }
    let mut out =
        String::from("MCP servers (each tool is named SERVER_TOOL and asked under that name):\n");
    for (name, server) in servers {
        let pattern = format!("{}*", mcp_tool_prefix(name));
        let decision = if !server.is_enabled() {
            "switched off".to_string()
        } else if !taskforce_agents::permission::disabled([pattern.as_str()], &agent.permission)
            .is_empty()
        {
            "hidden from the model".to_string()
        } else {
            agent.evaluate(&pattern, "*").action.to_string()
        };
        out.push_str(&format!("  {name}: {pattern}  {decision}\n"));
    }
    out
}

/// The first line of `text`, cut to `max` characters with an ellipsis.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// `taskforce agents create`.
fn create(
    context: &Context,
    description: &str,
    model: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let model = model
        .map(str::parse::<taskforce_agents::model::ModelRef>)
        .transpose()
        .map_err(UsageError::new)?;
    if description.trim().is_empty() {
        return Err(UsageError::new(anyhow::anyhow!("describe what the agent should do")).into());
    }
    let description = description.to_string();
    let created = context.with_store_runtime(move |runtime| async move {
        Ok(runtime.generate_agent(&description, model).await?)
    })?;
    if json {
        let mut value = serde_json::to_value(&created.agent)?;
        value["path"] = serde_json::Value::String(created.path.display().to_string());
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        outln!(
            "created agent {} in {}",
            created.agent.identifier,
            created.path.display()
        )?;
    }
    Ok(())
}
