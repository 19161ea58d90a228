//! The file tools on paths that go through symbolic links: the boundary and the `.env` read
//! rules are applied to where a path really leads.

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::agent::default_rules;
use crate::permission::{Action, PermissionError, Rule, Ruleset};
use crate::tool::testing::{Project, TestHost};
use crate::tool::{
    EditTool, GlobTool, GrepTool, ListTool, ReadTool, Tool, ToolError, ToolOutput, WriteTool,
};

/// A project whose host answers from the rules every agent starts from (its `ask` answers are
/// refusals).
fn with_default_rules() -> Project {
    let mut p = Project::new();
    p.host = std::sync::Arc::new(TestHost {
        rules: default_rules(&p.data),
        ..TestHost::default()
    });
    p
}

/// Allow everything, deny reading `*.env` files.
fn env_denied() -> Ruleset {
    vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("read", "*.env", Action::Deny),
    ]
}

async fn run(tool: &dyn Tool, p: &Project, args: Value) -> Result<ToolOutput, ToolError> {
    tool.execute(args, &p.ctx()).await
}

fn is_rejected(result: &Result<ToolOutput, ToolError>) -> bool {
    matches!(
        result,
        Err(ToolError::Permission(PermissionError::Rejected))
    )
}

fn is_denied(result: &Result<ToolOutput, ToolError>) -> bool {
    matches!(
        result,
        Err(ToolError::Permission(PermissionError::Denied { .. }))
    )
}

#[tokio::test]
async fn reading_a_link_to_a_file_outside_asks_external_directory() {
    let p = with_default_rules();
    let outside = p.outside();
    std::fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
    p.link("notes.txt", &outside.join("secret.txt"));
    let result = run(&ReadTool, &p, json!({"filePath": "notes.txt"})).await;
    assert!(is_rejected(&result), "{result:?}");
    let asks = p.asks();
    assert_eq!(asks[0].permission, "external_directory");
    assert_eq!(asks[0].patterns, vec![format!("{}/*", outside.display())]);
    assert_eq!(asks.len(), 1, "nothing is read once the boundary ask fails");
}

#[tokio::test]
async fn reading_a_link_to_env_follows_the_env_read_rule() {
    let p = with_default_rules();
    let env = p.file(".env", "SECRET=1\n");
    p.link("config.txt", Path::new(".env"));
    let result = run(&ReadTool, &p, json!({"filePath": "config.txt"})).await;
    assert!(is_rejected(&result), "the default rules ask: {result:?}");
    let asks = p.asks();
    let read = asks.iter().find(|a| a.permission == "read").unwrap();
    assert_eq!(read.patterns[0], env.display().to_string());

    let p = Project::with_rules(env_denied());
    p.file(".env", "SECRET=1\n");
    p.link("config.txt", Path::new(".env"));
    let result = run(&ReadTool, &p, json!({"filePath": "config.txt"})).await;
    assert!(is_denied(&result), "{result:?}");
}

#[tokio::test]
async fn a_link_elsewhere_in_the_project_is_read_without_asks_beyond_read() {
    let p = with_default_rules();
    p.file("src/a.txt", "alpha\n");
    p.link("alias.txt", Path::new("src/a.txt"));
    let out = run(&ReadTool, &p, json!({"filePath": "alias.txt"}))
        .await
        .unwrap();
    assert!(out.output.contains("alpha"));
    let asks = p.asks();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].permission, "read");
}

#[tokio::test]
async fn writing_through_a_linked_folder_outside_asks_and_writes_nothing_when_refused() {
    let p = with_default_rules();
    let outside = p.outside();
    p.link("out", &outside);
    let result = run(
        &WriteTool,
        &p,
        json!({"filePath": "out/new.txt", "content": "x"}),
    )
    .await;
    assert!(is_rejected(&result), "{result:?}");
    assert_eq!(p.asks()[0].permission, "external_directory");
    assert_eq!(
        p.asks()[0].patterns,
        vec![format!("{}/*", outside.display())]
    );
    assert!(!outside.join("new.txt").exists());

    std::fs::write(outside.join("kept.txt"), "before\n").unwrap();
    let result = run(
        &EditTool,
        &p,
        json!({"filePath": "out/kept.txt", "oldString": "before", "newString": "after"}),
    )
    .await;
    assert!(is_rejected(&result), "{result:?}");
    assert_eq!(
        std::fs::read_to_string(outside.join("kept.txt")).unwrap(),
        "before\n"
    );
}

#[tokio::test]
async fn writing_through_a_link_is_asked_as_an_edit_of_where_it_lands() {
    let p = Project::with_rules(vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("edit", "locked/*", Action::Deny),
    ]);
    p.file("locked/a.txt", "a\n");
    p.link("open", Path::new("locked"));
    let result = run(
        &WriteTool,
        &p,
        json!({"filePath": "open/a.txt", "content": "b\n"}),
    )
    .await;
    assert!(is_denied(&result), "{result:?}");
    assert_eq!(
        std::fs::read_to_string(p.root.join("locked/a.txt")).unwrap(),
        "a\n"
    );
}

#[tokio::test]
async fn grep_leaves_out_env_files_and_says_so() {
    let p = with_default_rules();
    let notes = p.file("notes.txt", "SECRET is a word\n");
    p.file(".env", "SECRET=hunter2\n");
    let out = run(&GrepTool, &p, json!({"pattern": "SECRET"}))
        .await
        .unwrap();
    assert!(!out.output.contains("hunter2"), "{}", out.output);
    assert!(!out.output.contains(".env"), "{}", out.output);
    assert!(out.output.contains(&notes.display().to_string()));
    assert!(
        out.output.ends_with(
            "(1 file skipped: reading it needs the user's permission; the read tool asks for it)"
        ),
        "{}",
        out.output
    );
    assert_eq!(out.metadata["skipped"], json!({"denied": 0, "asked": 1}));

    // A file searched by name through a link is judged by where the link leads.
    p.link("plain.txt", Path::new(".env"));
    let out = run(
        &GrepTool,
        &p,
        json!({"pattern": "SECRET", "path": "plain.txt"}),
    )
    .await
    .unwrap();
    assert!(!out.output.contains("hunter2"), "{}", out.output);
    assert!(out.output.starts_with("No files found"), "{}", out.output);

    let p = Project::with_rules(env_denied());
    p.file(".env", "SECRET=hunter2\n");
    let out = run(&GrepTool, &p, json!({"pattern": "SECRET"}))
        .await
        .unwrap();
    assert_eq!(
        out.output,
        "No files found\n\n(1 file skipped: the read rules deny it)"
    );
}

#[tokio::test]
async fn glob_leaves_out_denied_files_and_says_so() {
    let p = Project::with_rules(env_denied());
    let a = p.file("a.txt", "");
    p.file(".env", "SECRET=1\n");
    p.file("sub/.env", "SECRET=2\n");
    let out = run(&GlobTool, &p, json!({"pattern": "*"})).await.unwrap();
    assert_eq!(
        out.output,
        format!(
            "{}\n\n(2 files skipped: the read rules deny them)",
            a.display()
        )
    );
    assert_eq!(out.metadata["skipped"], json!({"denied": 2, "asked": 0}));
}

#[tokio::test]
async fn list_leaves_out_denied_files_and_links_to_them_and_says_so() {
    let p = Project::with_rules(env_denied());
    p.file("a.txt", "");
    p.file(".env", "SECRET=1\n");
    p.link("settings", Path::new(".env"));
    let out = run(&ListTool, &p, json!({})).await.unwrap();
    assert_eq!(
        out.output,
        format!(
            "{}/\n  a.txt\n\n(2 files skipped: the read rules deny them)",
            p.root.display()
        )
    );
}

#[tokio::test]
async fn a_project_reached_through_a_link_is_not_outside_itself() {
    let p = with_default_rules();
    let a = p.file("a.txt", "alpha\n");
    let alias = p.root.parent().unwrap().join("alias");
    std::os::unix::fs::symlink(&p.root, &alias).unwrap();
    let mut ctx = p.ctx();
    ctx.project_root = alias.clone();
    ctx.directory = alias.clone();
    for path in [a.clone(), alias.join("a.txt")] {
        let out = ReadTool
            .execute(json!({"filePath": path}), &ctx)
            .await
            .unwrap();
        assert!(out.output.contains("alpha"));
    }
    assert!(p.asks().iter().all(|a| a.permission == "read"));
}

#[test]
fn the_strictest_pattern_comes_first() {
    let p = Project::with_rules(vec![
        Rule::new("*", "*", Action::Allow),
        Rule::new("read", "*.key", Action::Ask),
        Rule::new("read", "*.env", Action::Deny),
    ]);
    let ctx = p.ctx();
    let ordered = strictest_first(
        &ctx,
        "read",
        vec![
            "a.txt".into(),
            "b.key".into(),
            "c.env".into(),
            "a.txt".into(),
        ],
    );
    assert_eq!(ordered, vec!["c.env", "b.key", "a.txt"]);
}

#[tokio::test]
async fn tool_output_in_a_linked_data_directory_stays_readable_in_both_forms() {
    let mut p = Project::new();
    let linked_data = p.root.parent().unwrap().join("data-link");
    std::os::unix::fs::symlink(&p.data, &linked_data).unwrap();
    p.host = std::sync::Arc::new(TestHost {
        rules: default_rules(&linked_data),
        ..TestHost::default()
    });
    std::fs::create_dir_all(p.data.join("tool-output")).unwrap();
    std::fs::write(p.data.join("tool-output/tool_1"), "saved output\n").unwrap();
    for path in [
        p.data.join("tool-output/tool_1"),
        linked_data.join("tool-output/tool_1"),
    ] {
        let out = run(&ReadTool, &p, json!({"filePath": path})).await.unwrap();
        assert!(out.output.contains("saved output"));
    }
}
