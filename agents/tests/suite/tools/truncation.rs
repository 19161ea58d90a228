//! Long tool output cut at 2000 lines or 50 KB with a hint of where to look next, and short
//! output marked as not cut.

use std::path::PathBuf;

use serde_json::json;
use taskforce_agents::tool::{self, run_tool};

use super::Env;

#[tokio::test]
async fn long_output_is_truncated_at_2000_lines_with_the_task_hint() {
    let env = Env::new();
    let out = env
        .run("bash", json!({"command": "seq 1 3000"}))
        .await
        .unwrap();
    assert_eq!(out.metadata["truncated"], true);
    let path = PathBuf::from(out.metadata["outputPath"].as_str().unwrap());
    assert!(path.starts_with(env.data_dir.join("tool-output")));
    assert!(
        path.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("tool_")
    );
    let saved = std::fs::read_to_string(&path).unwrap();
    assert_eq!(saved.lines().count(), 3000);
    assert!(out.output.starts_with("1\n2\n"));
    assert!(
        out.output
            .contains("\n2000\n\n...1001 lines truncated...\n\n"),
        "{}",
        &out.output[out.output.len() - 600..]
    );
    assert!(!out.output.contains("\n2001\n"));
    assert!(out.output.ends_with(&format!(
        "The tool call succeeded but the output was truncated. Full output saved to: {}\nUse the Task tool to have explore agent process this file with Grep and Read (with offset/limit). Do NOT read the full file yourself - delegate to save context.",
        path.display()
    )));
}

#[tokio::test]
async fn big_output_is_truncated_at_50_kb_with_the_grep_hint_when_task_is_denied() {
    let env = Env::new();
    // explore denies everything it is not given, task included.
    let ctx = env.ctx_for("explore");
    let bash = tool::tool("bash").unwrap();
    let out = run_tool(
        bash.as_ref(),
        json!({"command": "for i in $(seq 1 1000); do printf '%0100d\\n' $i; done"}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(out.metadata["truncated"], true);
    let path = PathBuf::from(out.metadata["outputPath"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap().len(), 101_000);
    // 506 lines (100 bytes + 505 × 101) fit in 51200 bytes.
    assert!(
        out.output.contains("\n\n...49895 bytes truncated...\n\n"),
        "{}",
        &out.output[out.output.len() - 400..]
    );
    assert!(out.output.ends_with(&format!(
        "Full output saved to: {}\nUse Grep to search the full content or Read with offset/limit to view specific sections.",
        path.display()
    )));
}

#[tokio::test]
async fn short_output_is_marked_not_truncated() {
    let env = Env::new();
    let out = env
        .run("bash", json!({"command": "echo hi"}))
        .await
        .unwrap();
    assert_eq!(out.metadata["truncated"], false);
    assert!(out.metadata.get("outputPath").is_none());
    assert!(!env.data_dir.join("tool-output").exists());
}
