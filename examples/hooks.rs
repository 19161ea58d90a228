//! Embedding example: hooks around every tool call.
//!
//! Two hooks are registered: one logs every call and its outcome, one refuses `bash` calls
//! containing `rm -rf` (the model sees the reason as the tool's error). Offline: a scripted
//! model tries `bash rm -rf` and `bash echo`, then answers.
//!
//! `cargo run --example hooks`

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use taskforce::{HookCall, Hooks, PromptInput, Runtime, ToolOutput};

/// Logs every tool call and its output's first line.
struct Logger;

#[async_trait]
impl Hooks for Logger {
    async fn tool_execute_before(
        &self,
        call: &HookCall<'_>,
        args: &mut Value,
    ) -> Result<(), String> {
        println!("[log] {} {} {}", call.agent, call.tool, args);
        Ok(())
    }

    async fn tool_execute_after(&self, call: &HookCall<'_>, output: &mut ToolOutput) {
        let first = output.output.lines().next().unwrap_or("");
        println!("[log] {} → {first}", call.tool);
    }
}

/// Refuses destructive shell commands.
struct NoRmRf;

#[async_trait]
impl Hooks for NoRmRf {
    async fn tool_execute_before(
        &self,
        call: &HookCall<'_>,
        args: &mut Value,
    ) -> Result<(), String> {
        let command = args["command"].as_str().unwrap_or("");
        if call.tool == "bash" && command.contains("rm -rf") {
            return Err(format!(
                "refused by the host: `{command}` deletes files recursively"
            ));
        }
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let script = json!({"rules": [
        {"when": {"agent": "build", "last_role": "user"}, "reply": {"tool_calls": [
            {"name": "bash", "input": {"command": "rm -rf ./build-output", "description": "clean"}},
            {"name": "bash", "input": {"command": "echo safe", "description": "echo"}}
        ]}},
        {"when": {"agent": "build", "last_role": "tool"}, "reply": {"text": "Tool results: {{last}}"}}
    ]});
    let dir = tempfile::tempdir()?;
    let script_path = dir.path().join("hooks-script.json");
    std::fs::write(&script_path, script.to_string())?;
    let (_project, options) = common::offline_options(&script_path.display().to_string())?;
    actix::System::new().block_on(async move {
        let runtime = Runtime::start(options).await?;
        runtime.add_hooks(Arc::new(Logger));
        runtime.add_hooks(Arc::new(NoRmRf));
        let session = runtime.create_session(None, None).await?;
        let answer = runtime
            .prompt(
                &session.id,
                PromptInput::text("clean up and say hi").with_agent("build"),
            )
            .await?;
        for part in &answer.parts {
            if let Some(text) = part.as_text() {
                println!("\n{}", text.text);
            }
        }
        anyhow::Ok(())
    })
}
