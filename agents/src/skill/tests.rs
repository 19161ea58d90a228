use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::config::Paths;
use crate::permission::{PermissionConfig, from_config};

/// A git project (`project/`, working in `project/sub`) and a home folder below a temp dir.
struct World {
    _dir: tempfile::TempDir,
    project: PathBuf,
    cwd: PathBuf,
    home: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("project");
        let cwd = project.join("sub");
        let home = base.join("home");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        World {
            _dir: dir,
            project,
            cwd,
            home,
        }
    }

    fn paths(&self) -> Paths {
        let env = BTreeMap::from([("HOME".to_string(), self.home.display().to_string())]);
        Paths::discover(&self.cwd, &env)
    }

    fn skills(&self) -> Skills {
        Skills::discover(&self.paths())
    }
}

/// Writes a `SKILL.md` with `name` and `description` (and `body`) at `dir/SKILL.md`.
fn skill(dir: &Path, name: &str, description: &str, body: &str) -> PathBuf {
    write(
        &dir.join(SKILL_FILE),
        &format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn names(skills: &Skills) -> Vec<&str> {
    skills.list().map(|s| s.name.as_str()).collect()
}

#[test]
fn skills_are_found_at_any_depth_with_their_body_and_file() {
    let w = World::new();
    let top = skill(
        &w.project.join(".taskforce/skills/release"),
        "release",
        "Cut a release",
        "# Release\n\nRun the script.",
    );
    skill(
        &w.project.join(".taskforce/skills/group/deep/lint"),
        "lint",
        "Lint it",
        "lint body",
    );
    let skills = w.skills();
    assert_eq!(names(&skills), ["lint", "release"]);
    let release = skills.get("release").unwrap();
    assert_eq!(release.description, "Cut a release");
    assert_eq!(release.content, "# Release\n\nRun the script.");
    assert_eq!(release.location, top);
    assert_eq!(release.dir(), w.project.join(".taskforce/skills/release"));
    assert!(skills.warnings().is_empty(), "{:?}", skills.warnings());
}

#[test]
fn every_project_location_is_searched_from_the_root_down_to_the_working_directory() {
    let w = World::new();
    skill(&w.project.join(".claude/skills/a"), "claude-root", "d", "");
    skill(
        &w.project.join(".opencode/skill/b"),
        "opencode-singular",
        "d",
        "",
    );
    skill(
        &w.project.join(".opencode/skills/c"),
        "opencode-plural",
        "d",
        "",
    );
    skill(
        &w.project.join(".taskforce/skill/d"),
        "taskforce-singular",
        "d",
        "",
    );
    skill(
        &w.cwd.join(".taskforce/skills/e"),
        "taskforce-nested",
        "d",
        "",
    );
    skill(&w.cwd.join(".claude/skills/f"), "claude-nested", "d", "");
    // Not a skill folder: skills only live below the named folders.
    skill(&w.project.join("docs/g"), "stray", "d", "");
    assert_eq!(
        names(&w.skills()),
        [
            "claude-nested",
            "claude-root",
            "opencode-plural",
            "opencode-singular",
            "taskforce-nested",
            "taskforce-singular"
        ]
    );
}

#[test]
fn global_folders_hold_skills_too() {
    let w = World::new();
    skill(&w.home.join(".claude/skills/x"), "from-claude", "d", "");
    skill(
        &w.home.join(".config/opencode/skill/y"),
        "from-opencode",
        "d",
        "",
    );
    skill(
        &w.home.join(".config/taskforce/skills/z"),
        "from-taskforce",
        "d",
        "",
    );
    assert_eq!(
        names(&w.skills()),
        ["from-claude", "from-opencode", "from-taskforce"]
    );
}

#[test]
fn roots_run_from_global_to_the_innermost_folder() {
    let w = World::new();
    let roots = skill_roots(&w.paths());
    let h = &w.home;
    let (p, c) = (&w.project, &w.cwd);
    assert_eq!(
        roots,
        [
            h.join(".claude/skills"),
            h.join(".config/opencode/skill"),
            h.join(".config/opencode/skills"),
            h.join(".config/taskforce/skill"),
            h.join(".config/taskforce/skills"),
            p.join(".claude/skills"),
            p.join(".opencode/skill"),
            p.join(".opencode/skills"),
            p.join(".taskforce/skill"),
            p.join(".taskforce/skills"),
            c.join(".claude/skills"),
            c.join(".opencode/skill"),
            c.join(".opencode/skills"),
            c.join(".taskforce/skill"),
            c.join(".taskforce/skills"),
        ]
    );
}

#[test]
fn a_project_skill_beats_a_global_one_and_a_nearer_folder_beats_the_root() {
    let w = World::new();
    skill(
        &w.home.join(".config/taskforce/skills/r"),
        "review",
        "global",
        "",
    );
    let root = skill(&w.project.join(".claude/skills/r"), "review", "root", "");
    let near = skill(&w.cwd.join(".claude/skills/r"), "review", "nearer", "");
    // In one folder, .taskforce wins over .claude.
    skill(&w.project.join(".claude/skills/f"), "fmt", "claude", "");
    let tf = skill(
        &w.project.join(".taskforce/skills/f"),
        "fmt",
        "taskforce",
        "",
    );
    let skills = w.skills();
    assert_eq!(skills.get("review").unwrap().description, "nearer");
    assert_eq!(skills.get("fmt").unwrap().description, "taskforce");
    let warnings = skills.warnings().join("\n");
    assert!(
        warnings.contains(&format!(
            "{}: skill \"review\" is also defined in {}; this one is used",
            near.display(),
            root.display()
        )),
        "{warnings}"
    );
    assert!(warnings.contains(&tf.display().to_string()), "{warnings}");
    assert_eq!(skills.warnings().len(), 3, "{warnings}");
}

#[test]
fn invalid_skills_are_skipped_with_a_warning_naming_the_file() {
    let w = World::new();
    let base = w.project.join(".taskforce/skills");
    let bad_yaml = write(
        &base.join("yaml/SKILL.md"),
        "---\nname: [unclosed\ndescription: d\n---\nbody\n",
    );
    let no_name = write(&base.join("noname/SKILL.md"), "---\ndescription: d\n---\n");
    let no_description = write(&base.join("nodesc/SKILL.md"), "---\nname: x\n---\n");
    let not_string = write(
        &base.join("number/SKILL.md"),
        "---\nname: 42\ndescription: d\n---\n",
    );
    let empty = write(
        &base.join("empty/SKILL.md"),
        "---\nname: \"  \"\ndescription: d\n---\n",
    );
    let unclosed = write(&base.join("open/SKILL.md"), "---\nname: x\n");
    let plain = write(&base.join("plain/SKILL.md"), "just text\n");
    skill(&base.join("good"), "good", "fine", "ok");
    let skills = w.skills();
    assert_eq!(names(&skills), ["good"]);
    let warnings = skills.warnings();
    assert_eq!(warnings.len(), 7, "{warnings:?}");
    let said = |file: &Path, what: &str| {
        let file = file.display().to_string();
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&file) && w.contains(what) && w.ends_with("skipped")),
            "{file}: {what} in {warnings:?}"
        );
    };
    said(&bad_yaml, "invalid YAML frontmatter");
    said(&no_name, "the frontmatter has no `name`");
    said(&no_description, "the frontmatter has no `description`");
    said(&not_string, "`name` must be a string, not 42");
    said(&empty, "`name` is empty");
    said(&unclosed, "never closed");
    said(&plain, "the frontmatter has no `name`");
}

#[test]
fn a_frontmatter_with_unquoted_colons_still_loads_as_opencode_reads_it() {
    let w = World::new();
    write(
        &w.project.join(".opencode/skills/c/SKILL.md"),
        "---\nname: colon\ndescription: Use when: the user asks\n---\nbody\n",
    );
    let skills = w.skills();
    assert_eq!(
        skills.get("colon").unwrap().description,
        "Use when: the user asks"
    );
}

#[cfg(unix)]
#[test]
fn linked_skill_folders_are_followed_and_a_link_loop_is_not_walked_forever() {
    let w = World::new();
    let elsewhere = w.home.join("shared/deploy");
    skill(&elsewhere, "deploy", "d", "");
    let base = w.project.join(".taskforce/skills");
    std::fs::create_dir_all(&base).unwrap();
    std::os::unix::fs::symlink(&elsewhere, base.join("deploy")).unwrap();
    std::os::unix::fs::symlink(&base, base.join("loop")).unwrap();
    let skills = w.skills();
    assert_eq!(names(&skills), ["deploy"]);
    assert_eq!(
        skills.get("deploy").unwrap().location,
        base.join("deploy/SKILL.md")
    );
}

#[test]
fn available_leaves_out_the_skills_the_rules_deny() {
    let w = World::new();
    let base = w.project.join(".taskforce/skills");
    for name in ["internal-db", "internal-ops", "public"] {
        skill(&base.join(name), name, "d", "");
    }
    let skills = w.skills();
    let config: PermissionConfig = serde_json::from_str(
        r#"{"*": "allow", "skill": {"internal-*": "deny", "internal-ops": "ask"}}"#,
    )
    .unwrap();
    let rules = from_config(&config, None);
    let shown: Vec<&str> = skills.available(&rules).map(|s| s.name.as_str()).collect();
    assert_eq!(shown, ["internal-ops", "public"]);
    assert_eq!(skills.dirs().len(), 3);
}

#[test]
fn no_folders_means_no_skills_and_no_warnings() {
    let w = World::new();
    let skills = w.skills();
    assert!(skills.is_empty());
    assert_eq!(skills.len(), 0);
    assert!(skills.warnings().is_empty());
}
