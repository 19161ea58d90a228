//! Finding `SKILL.md` files and reading their frontmatter.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use serde_json::{Map, Value};

use super::{SKILL_FILE, SkillInfo, Skills};
use crate::config::Paths;
use crate::markdown;

/// The folders skills are looked for in, lowest precedence first: the global ones, then each
/// project folder's from the git root down (each folder in the order `.claude/skills`,
/// `.opencode/skill`, `.opencode/skills`, `.taskforce/skill`, `.taskforce/skills`). A folder
/// listed twice (a home inside the project) keeps only its later, stronger place.
pub fn skill_roots(paths: &Paths) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let family = |roots: &mut Vec<PathBuf>, base: PathBuf| {
        roots.push(base.join("skill"));
        roots.push(base.join("skills"));
    };
    if let Some(home) = &paths.home {
        roots.push(home.join(".claude/skills"));
    }
    if let Some(x) = &paths.xdg_config {
        family(&mut roots, x.join("opencode"));
    }
    if let Some(g) = &paths.global_config_dir {
        family(&mut roots, g.clone());
    }
    for dir in &paths.project_dirs {
        roots.push(dir.join(".claude/skills"));
        family(&mut roots, dir.join(".opencode"));
        family(&mut roots, dir.join(".taskforce"));
    }
    let mut seen = Vec::new();
    for root in roots.into_iter().rev() {
        if !seen.contains(&root) {
            seen.push(root);
        }
    }
    seen.reverse();
    seen
}

/// Reads every `SKILL.md` below `roots` (lowest precedence first); a later skill of a name
/// replaces an earlier one.
pub(super) fn discover(roots: &[PathBuf]) -> Skills {
    let mut skills: BTreeMap<String, SkillInfo> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut warn = |message: String| {
        tracing::warn!("{message}");
        warnings.push(message);
    };
    for root in roots.iter().filter(|r| r.is_dir()) {
        for file in skill_files(root, &mut warn) {
            let skill = match read_skill(&file) {
                Ok(skill) => skill,
                Err(problem) => {
                    warn(format!("{problem}; the skill is skipped"));
                    continue;
                }
            };
            if let Some(old) = skills.get(&skill.name) {
                if old.location == skill.location {
                    continue;
                }
                warn(format!(
                    "{}: skill \"{}\" is also defined in {}; this one is used",
                    skill.location.display(),
                    skill.name,
                    old.location.display()
                ));
            }
            skills.insert(skill.name.clone(), skill);
        }
    }
    Skills { skills, warnings }
}

/// The `SKILL.md` files at any depth below `root`, sorted by path; links are followed (a link
/// loop is reported, not walked).
fn skill_files(root: &Path, warn: &mut impl FnMut(String)) -> Vec<PathBuf> {
    let walk = WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(true)
        .build();
    let mut files = Vec::new();
    for entry in walk {
        match entry {
            Ok(entry) => {
                let is_file = entry.file_type().is_some_and(|t| t.is_file());
                if is_file && entry.file_name() == SKILL_FILE {
                    files.push(entry.into_path());
                }
            }
            Err(e) => warn(format!("{}: cannot look for skills: {e}", root.display())),
        }
    }
    files.sort();
    files
}

/// One skill file, or what is wrong with it (naming the file).
fn read_skill(file: &Path) -> Result<SkillInfo, String> {
    let invalid = |problem: String| format!("{}: {problem}", file.display());
    if file.to_str().is_none() {
        return Err(invalid("the path is not valid UTF-8".into()));
    }
    let front = markdown::read(file).map_err(|e| e.to_string())?;
    let name = field(&front.data, "name").map_err(invalid)?;
    if name.contains(['\n', '\r']) {
        return Err(invalid("`name` must be a single line".into()));
    }
    let description = field(&front.data, "description").map_err(invalid)?;
    Ok(SkillInfo {
        name,
        description,
        location: file.to_path_buf(),
        content: front.body,
    })
}

/// The frontmatter's non-empty string `key`, trimmed.
fn field(data: &Map<String, Value>, key: &str) -> Result<String, String> {
    match data.get(key) {
        None | Some(Value::Null) => Err(format!("the frontmatter has no `{key}`")),
        Some(Value::String(s)) if s.trim().is_empty() => Err(format!("`{key}` is empty")),
        Some(Value::String(s)) => Ok(s.trim().to_string()),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}
