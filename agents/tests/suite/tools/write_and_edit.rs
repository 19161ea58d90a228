//! The write and edit tools, and the project-relative path an edit asks permission with.

use serde_json::json;
use taskforce_agents::permission::{Action, PermissionError, Rule};
use taskforce_agents::tool::{self, ToolError, run_tool};

use super::{Env, err_text};

#[tokio::test]
async fn write_then_edit() {
    let env = Env::new();
    let out = env
        .run(
            "write",
            json!({"filePath": "src/lib.rs", "content": "let a = 1;\nlet b = 1;\n"}),
        )
        .await
        .unwrap();
    assert_eq!(out.output, "Wrote file successfully.");
    let path = env.root().join("src/lib.rs");
    let read = || std::fs::read_to_string(&path).unwrap();

    // One occurrence.
    env.run(
        "edit",
        json!({"filePath": "src/lib.rs", "oldString": "let a", "newString": "let x"}),
    )
    .await
    .unwrap();
    assert_eq!(read(), "let x = 1;\nlet b = 1;\n");

    // Several occurrences without replaceAll: nothing changes.
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "= 1", "newString": "= 2"}),
        )
        .await,
    );
    assert!(err.starts_with("Found 2 matches for oldString"), "{err}");
    assert!(
        err.contains("more surrounding lines") && err.contains("replaceAll"),
        "{err}"
    );
    assert_eq!(read(), "let x = 1;\nlet b = 1;\n");

    // replaceAll.
    let out = env
        .run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "= 1", "newString": "= 2", "replaceAll": true}),
        )
        .await
        .unwrap();
    assert_eq!(read(), "let x = 2;\nlet b = 2;\n");
    assert_eq!(out.metadata["filediff"]["additions"], 2);
    assert_eq!(out.metadata["filediff"]["deletions"], 2);

    // Not found.
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "let z", "newString": "y"}),
        )
        .await,
    );
    assert!(
        err.starts_with("oldString not found in src/lib.rs"),
        "{err}"
    );

    // Same strings.
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "src/lib.rs", "oldString": "x", "newString": "x"}),
        )
        .await,
    );
    assert_eq!(err, "oldString and newString must be different");

    // Empty oldString creates a missing file.
    env.run(
        "edit",
        json!({"filePath": "docs/new.md", "oldString": "", "newString": "# New\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(env.root().join("docs/new.md")).unwrap(),
        "# New\n"
    );

    // Every change asked `edit` with the path relative to the project.
    let patterns: Vec<String> = env
        .asks()
        .into_iter()
        .filter(|a| a.permission == "edit")
        .map(|a| {
            assert_eq!(a.always, vec!["*"]);
            a.patterns.join(",")
        })
        .collect();
    assert_eq!(
        patterns,
        vec!["src/lib.rs", "src/lib.rs", "src/lib.rs", "docs/new.md"]
    );
}

#[tokio::test]
async fn edit_permission_uses_the_project_relative_path_from_a_subdirectory() {
    let env = Env::with(
        "",
        vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("edit", "src/*", Action::Deny),
        ],
    );
    env.file("src/a.rs", "a\n");
    let mut ctx = env.ctx();
    ctx.directory = env.root().join("src");
    let edit = tool::tool("edit").unwrap();
    let err = run_tool(
        edit.as_ref(),
        json!({"filePath": "a.rs", "oldString": "a", "newString": "b"}),
        &ctx,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ToolError::Permission(PermissionError::Denied { .. })),
        "{err}"
    );
    assert_eq!(env.asks()[0].patterns, vec!["src/a.rs"]);
    assert_eq!(
        std::fs::read_to_string(env.root().join("src/a.rs")).unwrap(),
        "a\n"
    );
}
