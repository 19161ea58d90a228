//! The list, glob and grep tools: `.gitignore` respected, junk skipped, grep's include filter.

use serde_json::json;

use super::Env;

fn gitignored_project(env: &Env) {
    env.file(".gitignore", "ignored/\n*.tmp\n");
    env.file("src/main.rs", "fn main() { println!(\"needle\"); }\n");
    env.file("src/util.rs", "pub fn helper() {} // needle\n");
    env.file("README.md", "needle in readme\n");
    env.file("ignored/secret.rs", "needle\n");
    env.file("scratch.tmp", "needle\n");
    env.file("node_modules/pkg/index.js", "needle\n");
}

#[tokio::test]
async fn list_respects_gitignore_and_skips_junk() {
    let env = Env::new();
    gitignored_project(&env);
    let out = env.run("list", json!({})).await.unwrap();
    assert_eq!(
        out.output,
        format!(
            "{}/\n  src/\n    main.rs\n    util.rs\n  .gitignore\n  README.md\n  taskforce.toml\n",
            env.root().display()
        )
    );
    let asks = env.asks();
    assert_eq!(asks[0].permission, "list");
    assert_eq!(asks[0].patterns, vec![env.root().display().to_string()]);
}

#[tokio::test]
async fn glob_respects_gitignore() {
    let env = Env::new();
    gitignored_project(&env);
    let out = env
        .run("glob", json!({"pattern": "**/*.rs"}))
        .await
        .unwrap();
    let mut lines: Vec<&str> = out.output.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            env.root().join("src/main.rs").display().to_string(),
            env.root().join("src/util.rs").display().to_string(),
        ]
    );
    let out = env.run("glob", json!({"pattern": "*.tmp"})).await.unwrap();
    assert_eq!(out.output, "No files found");
    let asks = env.asks();
    assert_eq!(asks[0].permission, "glob");
    assert_eq!(asks[0].patterns, vec!["**/*.rs"]);
}

#[tokio::test]
async fn grep_respects_gitignore_and_include() {
    let env = Env::new();
    gitignored_project(&env);
    let out = env.run("grep", json!({"pattern": "needle"})).await.unwrap();
    // Like ripgrep, grep skips only what .gitignore (and .git) exclude: a node_modules that
    // is not ignored is searched; list is the tool that leaves such folders out.
    assert!(
        out.output.starts_with("Found 4 matches\n"),
        "{}",
        out.output
    );
    for file in [
        "src/main.rs",
        "src/util.rs",
        "README.md",
        "node_modules/pkg/index.js",
    ] {
        assert!(
            out.output
                .contains(&format!("{}:\n  Line 1: ", env.root().join(file).display()))
        );
    }
    for file in ["ignored", "scratch.tmp"] {
        assert!(!out.output.contains(file), "{file}: {}", out.output);
    }
    let out = env
        .run("grep", json!({"pattern": "needle", "include": "*.md"}))
        .await
        .unwrap();
    assert_eq!(
        out.output,
        format!(
            "Found 1 matches\n{}:\n  Line 1: needle in readme",
            env.root().join("README.md").display()
        )
    );
    let asks = env.asks();
    assert_eq!(asks[0].permission, "grep");
    assert_eq!(asks[0].patterns, vec!["needle"]);
}
