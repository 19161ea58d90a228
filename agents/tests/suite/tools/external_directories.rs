//! Paths outside the project ask for the external directory first; saved tool output stays
//! readable under the default rules.

use serde_json::json;
use taskforce_agents::permission::PermissionError;
use taskforce_agents::tool::ToolError;

use super::Env;

#[tokio::test]
async fn outside_paths_ask_external_directory_first() {
    let env = Env::with_agent_rules("build");
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("notes.txt");
    std::fs::write(&file, "hi\n").unwrap();
    let err = env
        .run("read", json!({"filePath": file.display().to_string()}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Permission(PermissionError::Rejected));
    let asks = env.asks();
    assert_eq!(asks.len(), 1, "read itself is not asked after the refusal");
    assert_eq!(asks[0].permission, "external_directory");
    let glob = format!("{}/*", outside.path().display());
    assert_eq!(asks[0].patterns, vec![glob.clone()]);
    assert_eq!(asks[0].always, vec![glob]);

    // A relative path escaping the project is outside too.
    let err = env
        .run(
            "write",
            json!({"filePath": "../escape.txt", "content": "x"}),
        )
        .await;
    assert!(err.is_err());
    assert!(!env.root().join("../escape.txt").exists());
    let last = env.asks().pop().unwrap();
    assert_eq!(last.permission, "external_directory");
    assert_eq!(
        last.patterns,
        vec![format!("{}/*", env.root().parent().unwrap().display())]
    );

    // Directory tools ask about the directory itself.
    env.run(
        "list",
        json!({"path": outside.path().display().to_string()}),
    )
    .await
    .unwrap_err();
    let last = env.asks().pop().unwrap();
    assert_eq!(
        last.patterns,
        vec![format!("{}/*", outside.path().display())]
    );
}

#[tokio::test]
async fn saved_tool_output_stays_readable_under_default_rules() {
    let env = Env::with_agent_rules("build");
    let saved = env.data_dir.join("tool-output/tool_test");
    std::fs::create_dir_all(saved.parent().unwrap()).unwrap();
    std::fs::write(&saved, "saved\n").unwrap();
    let out = env
        .run("read", json!({"filePath": saved.display().to_string()}))
        .await
        .unwrap();
    assert!(out.output.contains("00001| saved"));
    let asks = env.asks();
    assert_eq!(asks[0].permission, "external_directory");
    assert_eq!(asks[1].permission, "read");
}
