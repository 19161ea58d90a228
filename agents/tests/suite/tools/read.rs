//! The read tool: numbered lines with offset and limit, refusing binary, missing and directory
//! paths, the path it asks with, and `.env` files under the agent's rules.

use serde_json::json;
use taskforce_agents::permission::PermissionError;
use taskforce_agents::tool::ToolError;

use super::{Env, err_text};

#[tokio::test]
async fn read_numbers_lines_with_offset_and_limit() {
    let env = Env::new();
    let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    let path = env.file("src/big.txt", &text);
    let out = env
        .run("read", json!({"filePath": "src/big.txt"}))
        .await
        .unwrap();
    assert!(
        out.output
            .starts_with("<file>\n00001| line 1\n00002| line 2\n"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .ends_with("00050| line 50\n\n(End of file - total 50 lines)\n</file>")
    );
    assert_eq!(out.title, "src/big.txt");

    let out = env
        .run(
            "read",
            json!({"filePath": path.display().to_string(), "offset": 10, "limit": 5}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.output,
        "<file>\n00011| line 11\n00012| line 12\n00013| line 13\n00014| line 14\n00015| line 15\n\n(File has more lines. Use 'offset' parameter to read beyond line 15)\n</file>"
    );
    assert_eq!(out.metadata["truncated"], true);
    assert!(out.metadata.get("outputPath").is_none());
}

#[tokio::test]
async fn read_refuses_binary_missing_and_directories() {
    let env = Env::new();
    std::fs::write(env.root().join("blob"), [0x7f, b'E', b'L', b'F', 0, 0, 1]).unwrap();
    let err = err_text(env.run("read", json!({"filePath": "blob"})).await);
    assert!(err.starts_with("Cannot read binary file: "), "{err}");
    let err = err_text(env.run("read", json!({"filePath": "nope.txt"})).await);
    assert_eq!(
        err,
        format!("File not found: {}", env.root().join("nope.txt").display())
    );
    std::fs::create_dir(env.root().join("dir")).unwrap();
    let err = err_text(env.run("read", json!({"filePath": "dir"})).await);
    assert!(err.starts_with("Path is a directory, not a file:"), "{err}");
}

#[tokio::test]
async fn read_asks_with_the_absolute_path() {
    let env = Env::new();
    let path = env.file("a.txt", "x\n");
    env.run("read", json!({"filePath": "./a.txt"}))
        .await
        .unwrap();
    let asks = env.asks();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].permission, "read");
    assert_eq!(asks[0].patterns, vec![path.display().to_string()]);
    assert_eq!(asks[0].always, vec!["*"]);
}

#[tokio::test]
async fn read_of_env_files_follows_the_agent_rules() {
    let env = Env::with_agent_rules("build");
    env.file(".env", "SECRET=1\n");
    env.file(".env.example", "SECRET=\n");
    let err = env
        .run("read", json!({"filePath": ".env"}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Permission(PermissionError::Rejected));
    env.run("read", json!({"filePath": ".env.example"}))
        .await
        .unwrap();
}
