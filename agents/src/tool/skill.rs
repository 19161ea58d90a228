//! `skill {name}`: loads a skill's instructions (OpenCode's skill tool). Its description lists
//! the skills the calling agent's rules do not deny; a call asks `skill` with the skill's name
//! as pattern and answers the instructions, the skill's folder and a sample of its files.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ignore::WalkBuilder;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::permission::PermissionAsk;
use crate::skill::{SKILL_FILE, SKILL_PERMISSION, SkillInfo};

const ID: &str = "skill";

/// How many of a skill's other files the output lists.
const FILE_SAMPLE: usize = 10;

/// The description when the caller may load no skill.
const NONE_AVAILABLE: &str = "Load a specialized skill that provides domain-specific instructions and workflows. No skills are currently available.";

/// The skill tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkillTool;

#[derive(Debug, Deserialize)]
struct Args {
    name: String,
}

#[async_trait]
impl Tool for SkillTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, caller: &AgentInfo, registry: &Registry) -> String {
        let skills: Vec<&SkillInfo> = registry.skills().available(&caller.permission).collect();
        if skills.is_empty() {
            return NONE_AVAILABLE.to_string();
        }
        let mut lines = vec![
            include_str!("descriptions/skill.txt")
                .trim_end()
                .to_string(),
            String::new(),
            "<available_skills>".to_string(),
        ];
        for skill in skills {
            lines.push("  <skill>".into());
            lines.push(format!("    <name>{}</name>", skill.name));
            lines.push(format!(
                "    <description>{}</description>",
                skill.description
            ));
            lines.push(format!(
                "    <location>{}</location>",
                file_url(&skill.location)
            ));
            lines.push("  </skill>".into());
        }
        lines.push("</available_skills>".into());
        lines.join("\n")
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The name of the skill from available_skills"}
            },
            "required": ["name"]
        })
    }

    fn only_reads(&self) -> bool {
        true
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let skills = ctx.registry.skills();
        let Some(skill) = skills.get(&args.name) else {
            let known: Vec<&str> = skills
                .available(&ctx.agent.permission)
                .map(|s| s.name.as_str())
                .collect();
            let known = if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            };
            return Err(ToolError::Failed(format!(
                "Skill \"{}\" not found. Available skills: {known}",
                args.name
            )));
        };
        ctx.ask(PermissionAsk {
            permission: SKILL_PERMISSION.into(),
            patterns: vec![skill.name.clone()],
            always: vec![skill.name.clone()],
            force_ask: false,
            metadata: Map::new(),
        })
        .await?;

        let dir = skill.dir().to_path_buf();
        let walked = dir.clone();
        let files = tokio::task::spawn_blocking(move || sample_files(&walked))
            .await
            .map_err(|e| ToolError::Failed(format!("listing the skill's files failed: {e}")))?;
        let files: Vec<String> = files
            .iter()
            .map(|f| format!("<file>{}</file>", f.display()))
            .collect();
        let output = [
            format!("<skill_content name=\"{}\">", skill.name),
            format!("# Skill: {}", skill.name),
            String::new(),
            skill.content.trim().to_string(),
            String::new(),
            format!("Base directory for this skill: {}", file_url(&dir)),
            "Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.".into(),
            "Note: file list is sampled.".into(),
            String::new(),
            "<skill_files>".into(),
            files.join("\n"),
            "</skill_files>".into(),
            "</skill_content>".into(),
        ]
        .join("\n");
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(skill.name));
        metadata.insert("dir".into(), json!(dir.display().to_string()));
        Ok(ToolOutput {
            title: format!("Loaded skill: {}", skill.name),
            output,
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }
}

/// `file:///…` for an absolute path (the path itself when it cannot be one).
fn file_url(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(String::from)
        .unwrap_or_else(|()| path.display().to_string())
}

/// Up to [`FILE_SAMPLE`] files of a skill's folder other than its `SKILL.md` files, in path
/// order: hidden files included, `.gitignore`d ones and `.git` left out, links not followed.
fn sample_files(dir: &Path) -> Vec<PathBuf> {
    let walk = WalkBuilder::new(dir)
        .hidden(false)
        .require_git(false)
        .sort_by_file_name(Ord::cmp)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    walk.flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter(|e| e.file_name() != SKILL_FILE)
        .map(|e| e.into_path())
        .take(FILE_SAMPLE)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{Action, Rule};
    use crate::tool::testing::Project;

    fn skill_file(p: &Project, rel: &str, name: &str, description: &str, body: &str) -> PathBuf {
        p.file(
            &format!(".taskforce/skills/{rel}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"),
        )
    }

    /// Calls the skill tool for `name` as `build` in `p`.
    async fn call(p: &Project, name: &str) -> Result<ToolOutput, ToolError> {
        SkillTool.execute(json!({ "name": name }), &p.ctx()).await
    }

    fn project_with_skills(rules: Vec<Rule>) -> Project {
        let mut p = Project::with_rules(rules);
        skill_file(
            &p,
            "release",
            "release",
            "Cut a release",
            "Run ./scripts/release.sh",
        );
        p.file(".taskforce/skills/release/scripts/release.sh", "echo go\n");
        p.file(".taskforce/skills/release/reference.md", "ref\n");
        skill_file(
            &p,
            "internal-db",
            "internal-db",
            "Poke the database",
            "secret",
        );
        p.reload_registry();
        p
    }

    #[test]
    fn the_description_lists_each_skill_with_its_location() {
        let p = project_with_skills(vec![Rule::new("*", "*", Action::Allow)]);
        let build = p.registry.get("build").unwrap();
        let text = SkillTool.description(build, &p.registry);
        assert!(
            text.starts_with("Load a specialized skill that provides domain-specific instructions and workflows.\n\nWhen you recognize"),
            "{text}"
        );
        let url = file_url(&p.root.join(".taskforce/skills/release/SKILL.md"));
        assert!(
            text.ends_with(&format!(
                "listed below:\n\n<available_skills>\n  <skill>\n    <name>internal-db</name>\n    <description>Poke the database</description>\n    <location>{}</location>\n  </skill>\n  <skill>\n    <name>release</name>\n    <description>Cut a release</description>\n    <location>{url}</location>\n  </skill>\n</available_skills>",
                file_url(&p.root.join(".taskforce/skills/internal-db/SKILL.md"))
            )),
            "{text}"
        );
        assert!(url.starts_with("file:///"), "{url}");
    }

    #[test]
    fn no_skills_says_so() {
        let p = Project::new();
        let build = p.registry.get("build").unwrap();
        assert_eq!(SkillTool.description(build, &p.registry), NONE_AVAILABLE);
    }

    #[tokio::test]
    async fn a_call_answers_the_body_the_folder_and_its_files() {
        let p = project_with_skills(vec![Rule::new("*", "*", Action::Allow)]);
        let out = call(&p, "release").await.unwrap();
        let dir = p.root.join(".taskforce/skills/release");
        assert_eq!(out.title, "Loaded skill: release");
        assert_eq!(
            out.output,
            format!(
                "<skill_content name=\"release\">\n# Skill: release\n\nRun ./scripts/release.sh\n\nBase directory for this skill: {}\nRelative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\nNote: file list is sampled.\n\n<skill_files>\n<file>{}</file>\n<file>{}</file>\n</skill_files>\n</skill_content>",
                file_url(&dir),
                dir.join("reference.md").display(),
                dir.join("scripts/release.sh").display(),
            )
        );
        let metadata = serde_json::to_value(&out.metadata).unwrap();
        assert_eq!(metadata["name"], "release");
        assert_eq!(metadata["dir"], dir.display().to_string());
        let asks = p.asks();
        assert_eq!(asks.len(), 1);
        assert_eq!(asks[0].permission, "skill");
        assert_eq!(asks[0].patterns, ["release"]);
        assert_eq!(asks[0].always, ["release"]);
    }

    #[tokio::test]
    async fn an_unknown_name_lists_the_skills_there_are() {
        let p = project_with_skills(vec![Rule::new("*", "*", Action::Allow)]);
        let err = call(&p, "nope").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "Skill \"nope\" not found. Available skills: internal-db, release"
        );
        let p = Project::new();
        let err = call(&p, "nope").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "Skill \"nope\" not found. Available skills: none"
        );
    }

    #[tokio::test]
    async fn a_denied_skill_is_refused_by_the_rules() {
        let p = project_with_skills(vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("skill", "internal-*", Action::Deny),
        ]);
        let err = call(&p, "internal-db").await.unwrap_err();
        assert!(matches!(err, ToolError::Permission(_)), "{err:?}: {}", err);
    }

    #[tokio::test]
    async fn missing_name_is_an_invalid_arguments_error() {
        let p = Project::new();
        let err = SkillTool.execute(json!({}), &p.ctx()).await.unwrap_err();
        assert!(err.to_string().contains("missing field `name`"), "{err}");
    }
}
