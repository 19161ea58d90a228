//! Skills: folders holding a `SKILL.md` (YAML frontmatter with `name` and `description`, then
//! the instructions) that an agent loads on demand with the `skill` tool, as in OpenCode and
//! Claude Code.
//!
//! Where they are found, lowest precedence first (a later skill of the same name replaces an
//! earlier one, with a warning naming both files):
//!
//! 1. global: `~/.claude/skills/`, `<config>/opencode/skill(s)/`, `<config>/taskforce/skill(s)/`
//!    (`<config>` is `$XDG_CONFIG_HOME` or `~/.config`);
//! 2. each project folder from the git root down to the working directory (a nearer folder
//!    wins): `.claude/skills/`, `.opencode/skill(s)/`, `.taskforce/skill(s)/`.
//!
//! Below each of these, every `SKILL.md` at any depth is a skill (links are followed). A file
//! that cannot be read, whose frontmatter is not YAML, or that lacks a `name` or a
//! `description`, is skipped with a warning naming it.

mod discover;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use discover::skill_roots;

use crate::permission::{self, Action, Rule};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// The permission the `skill` tool asks, with the skill's name as pattern.
pub const SKILL_PERMISSION: &str = "skill";

/// One skill, in OpenCode's shape (`GET /skill`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SkillInfo {
    /// The skill's name (frontmatter `name`): what the `skill` tool is called with.
    pub name: String,
    /// When to use the skill (frontmatter `description`).
    pub description: String,
    /// The skill's `SKILL.md` file.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub location: PathBuf,
    /// The instructions: the file's body after the frontmatter.
    pub content: String,
}

impl SkillInfo {
    /// The skill's folder, where its other files (scripts, references) live.
    pub fn dir(&self) -> &Path {
        self.location.parent().unwrap_or(&self.location)
    }
}

/// Every skill found, by name, and the warnings about files that were skipped or replaced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Skills {
    skills: BTreeMap<String, SkillInfo>,
    warnings: Vec<String>,
}

impl Skills {
    /// The skills below `roots`, lowest precedence first (see [`skill_roots`]); problems are
    /// logged as warnings and kept in [`Skills::warnings`].
    pub fn from_roots(roots: &[PathBuf]) -> Skills {
        discover::discover(roots)
    }

    /// The skills of a configuration's folders (see the module documentation).
    pub fn discover(paths: &crate::config::Paths) -> Skills {
        Skills::from_roots(&skill_roots(paths))
    }

    /// The skill called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&SkillInfo> {
        self.skills.get(name)
    }

    /// Every skill, by name.
    pub fn list(&self) -> impl Iterator<Item = &SkillInfo> {
        self.skills.values()
    }

    /// How many skills there are.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether no skill was found.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The skills `rules` do not deny outright (the last matching `skill` rule for the name is
    /// not `deny`): those an agent with these rules is told about.
    pub fn available<'a>(&'a self, rules: &'a [Rule]) -> impl Iterator<Item = &'a SkillInfo> {
        self.list().filter(move |skill| {
            permission::evaluate(SKILL_PERMISSION, &skill.name, &[rules]).action != Action::Deny
        })
    }

    /// What was skipped or replaced, one line per file, naming it.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Each skill's folder, once, sorted.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.list().map(|s| s.dir().to_path_buf()).collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }
}
