//! The agent registry: built-ins, then config and markdown agents, resolved into AgentInfo.
//!
//! Each agent's ruleset is, in order: the shared defaults, the rules letting agents read the
//! skills' folders, the built-in agent's own rules, the global `[permission]` rules, the agent's own config rules, and finally (unless the user denied
//! it explicitly) the rule that keeps truncated tool output readable. The last match wins, so
//! the agent's own config beats the global config, which beats the built-in definition.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Map;

use super::builtin::builtins;
use super::config::legacy_then_explicit;
use super::defaults::both_forms;
use super::{
    AgentConfig, AgentError, AgentInfo, AgentMode, RuleOrigin, default_rules, tool_output_globs,
};
use crate::config::{Config, Paths, merge_json};
use crate::permission::{self, Action, Rule, Ruleset, from_config};
use crate::skill::Skills;
use crate::tool::BUILTIN_TOOLS;

/// Every agent of a configuration, which one is the default, and the skills they may load.
#[derive(Debug, Clone, PartialEq)]
pub struct Registry {
    /// Shared, so that a session step holds its agent without copying it.
    agents: IndexMap<String, Arc<AgentInfo>>,
    default: String,
    skills: Arc<Skills>,
}

impl Registry {
    /// Resolves every agent of `config`, with the skills found in `paths`' folders; fails when
    /// `default_agent` cannot be the default.
    pub fn new(config: &Config, paths: &Paths) -> Result<Registry, AgentError> {
        Registry::with_skills(config, paths, Skills::discover(paths))
    }

    /// Resolves every agent of `config` with these skills.
    pub fn with_skills(
        config: &Config,
        paths: &Paths,
        skills: Skills,
    ) -> Result<Registry, AgentError> {
        let home = paths.home.as_deref();
        let defaults = default_rules(&paths.data_dir);
        let skill_dirs = skill_dir_rules(&skills);
        let user = legacy_then_explicit(config.tools.as_ref(), config.permission.as_ref())
            .map(|p| from_config(&p, home))
            .unwrap_or_default();

        let mut agents = IndexMap::new();
        for (name, builtin) in builtins()? {
            let mut own = builtin
                .permission
                .as_ref()
                .map(|p| from_config(p, home))
                .unwrap_or_default();
            own.extend(dynamic_builtin_rules(name, paths));
            let mut info = AgentInfo::new(name.clone(), true);
            apply_fields(&mut info, builtin);
            push_rules(&mut info, &defaults, RuleOrigin::Defaults);
            push_rules(&mut info, &skill_dirs, RuleOrigin::Skills);
            push_rules(&mut info, &own, RuleOrigin::Builtin);
            push_rules(&mut info, &user, RuleOrigin::GlobalConfig);
            agents.insert(name.clone(), info);
        }

        for (name, agent) in &config.agent {
            if agent.disable == Some(true) {
                agents.shift_remove(name);
                continue;
            }
            let info = agents
                .entry(name.clone())
                .or_insert_with(|| custom(name, &defaults, &skill_dirs, &user));
            apply_fields(info, agent);
            if let Some(p) = agent.effective_permission() {
                push_rules(info, &from_config(&p, home), RuleOrigin::AgentConfig);
            }
        }

        let keep_output: Ruleset = tool_output_globs(&paths.data_dir)
            .into_iter()
            .map(|glob| Rule::new("external_directory", glob, Action::Allow))
            .collect();
        let denied: Ruleset = keep_output
            .iter()
            .map(|rule| Rule {
                action: Action::Deny,
                ..rule.clone()
            })
            .collect();
        for info in agents.values_mut() {
            if !denied.iter().any(|rule| info.permission.contains(rule)) {
                push_rules(info, &keep_output, RuleOrigin::ToolOutput);
            }
            info.disabled_tools =
                permission::disabled(BUILTIN_TOOLS.iter().copied(), &info.permission);
        }

        let default = resolve_default(config.default_agent.as_deref(), &agents)?;
        let agents = agents
            .into_iter()
            .map(|(name, info)| (name, Arc::new(info)))
            .collect();
        Ok(Registry {
            agents,
            default,
            skills: Arc::new(skills),
        })
    }

    /// Every skill found (the `skill` tool tells each agent about those its rules allow).
    pub fn skills(&self) -> &Skills {
        &self.skills
    }

    /// The agent called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&AgentInfo> {
        self.agents.get(name).map(|a| &**a)
    }

    /// The agent called `name`, shared, or an error listing the known agents.
    pub fn require_shared(&self, name: &str) -> Result<Arc<AgentInfo>, AgentError> {
        self.agents
            .get(name)
            .cloned()
            .ok_or_else(|| AgentError::NotFound {
                name: name.to_string(),
                known: self.names(),
            })
    }

    /// The agent called `name`, or an error listing the known agents.
    pub fn require(&self, name: &str) -> Result<&AgentInfo, AgentError> {
        self.get(name).ok_or_else(|| AgentError::NotFound {
            name: name.to_string(),
            known: self.names(),
        })
    }

    /// The default agent: `default_agent` when set, else the first primary visible agent.
    pub fn default_agent(&self) -> &AgentInfo {
        // `default` was resolved from `agents` in `new`, so it is always present.
        self.agents
            .get(&self.default)
            .unwrap_or_else(|| &self.agents[0])
            .as_ref()
    }

    /// Every agent, hidden ones included: the default first, then definition order
    /// (build, plan, general, explore, compaction, title, summary, then custom agents).
    pub fn list(&self) -> impl Iterator<Item = &AgentInfo> {
        let default = self.agents.get(&self.default).map(|a| &**a);
        default.into_iter().chain(
            self.agents
                .values()
                .map(|a| &**a)
                .filter(move |a| a.name != self.default),
        )
    }

    /// Every agent's name, in `list` order.
    pub fn names(&self) -> Vec<String> {
        self.list().map(|a| a.name.clone()).collect()
    }
}

/// A custom agent before its config applies: mode `all`, not native, defaults (with the skill
/// folders) + global rules.
fn custom(name: &str, defaults: &Ruleset, skill_dirs: &Ruleset, user: &Ruleset) -> AgentInfo {
    let mut info = AgentInfo::new(name, false);
    push_rules(&mut info, defaults, RuleOrigin::Defaults);
    push_rules(&mut info, skill_dirs, RuleOrigin::Skills);
    push_rules(&mut info, user, RuleOrigin::GlobalConfig);
    info
}

/// Applies the fields a config sets, in OpenCode's order; rules are handled by the caller.
fn apply_fields(info: &mut AgentInfo, config: &AgentConfig) {
    if let Some(m) = &config.model {
        info.model = Some(m.clone());
    }
    if let Some(v) = &config.variant {
        info.variant = Some(v.clone());
    }
    if let Some(p) = &config.prompt {
        info.prompt = Some(p.clone());
    }
    if let Some(d) = &config.description {
        info.description = Some(d.clone());
    }
    if let Some(t) = config.temperature {
        info.temperature = Some(t);
    }
    if let Some(t) = config.top_p {
        info.top_p = Some(t);
    }
    if let Some(m) = config.mode {
        info.mode = m;
    }
    if let Some(c) = &config.color {
        info.color = Some(c.clone());
    }
    if let Some(h) = config.hidden {
        info.hidden = h;
    }
    if let Some(d) = config.disable_task {
        info.disable_task = d;
    }
    if let Some(s) = config.step_limit() {
        info.steps = Some(s);
    }
    let options: Map<_, _> = config.options.clone().into_iter().collect();
    merge_json(&mut info.options, &options);
}

fn push_rules(info: &mut AgentInfo, rules: &[Rule], origin: RuleOrigin) {
    info.permission.extend_from_slice(rules);
    info.origins
        .extend(std::iter::repeat_n(origin, rules.len()));
}

/// `external_directory` allows for every skill's folder (both forms), so that an agent reads a
/// skill's files without being asked, as OpenCode allows them.
fn skill_dir_rules(skills: &Skills) -> Ruleset {
    skills
        .dirs()
        .iter()
        .flat_map(|dir| both_forms(dir))
        .map(|glob| Rule::new("external_directory", glob, Action::Allow))
        .collect()
}

/// Built-in rules that depend on the data directory.
fn dynamic_builtin_rules(name: &str, paths: &Paths) -> Ruleset {
    match name {
        "plan" => both_forms(&paths.plans_dir())
            .into_iter()
            .map(|glob| Rule::new("external_directory", glob, Action::Allow))
            .collect(),
        "explore" => tool_output_globs(&paths.data_dir)
            .into_iter()
            .map(|glob| Rule::new("external_directory", glob, Action::Allow))
            .collect(),
        _ => Vec::new(),
    }
}

/// The default agent's name, checked: it must exist, not be a subagent, not be hidden.
fn resolve_default(
    configured: Option<&str>,
    agents: &IndexMap<String, AgentInfo>,
) -> Result<String, AgentError> {
    match configured {
        Some(name) => {
            let agent = agents
                .get(name)
                .ok_or_else(|| AgentError::DefaultNotFound {
                    name: name.to_string(),
                    known: agents.keys().cloned().collect(),
                })?;
            if agent.mode == AgentMode::Subagent {
                return Err(AgentError::DefaultIsSubagent(name.to_string()));
            }
            if agent.hidden {
                return Err(AgentError::DefaultIsHidden(name.to_string()));
            }
            Ok(name.to_string())
        }
        None => agents
            .values()
            .find(|a| a.mode != AgentMode::Subagent && !a.hidden)
            .map(|a| a.name.clone())
            .ok_or(AgentError::NoPrimary),
    }
}
