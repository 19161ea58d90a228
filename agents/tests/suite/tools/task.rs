//! The task tool: the subagents its description lists, running one and formatting its result,
//! the agent's own model, an unknown agent, and the permission ask.

use serde_json::json;
use taskforce_agents::model::{ModelRef, ToolStatus};
use taskforce_agents::permission::{Action, PermissionError, Rule};
use taskforce_agents::tool::{self, SubagentRequest, ToolError, run_tool};

use super::{Env, err_text};

const AGENTS: &str = r#"
[agent.helper]
mode = "subagent"
hidden = true
description = "Helps quietly."

[agent.bare]
mode = "subagent"

[agent.secret]
mode = "subagent"
description = "Not for build."

[agent.pinned]
mode = "subagent"
description = "Runs on its own model."
model = "special/pinned-model"

[agent.build.permission.task]
secret = "deny"

[provider.special]
type = "openai"
"#;

fn task_env() -> Env {
    Env::with(AGENTS, vec![Rule::new("*", "*", Action::Allow)])
}

#[test]
fn task_description_lists_allowed_subagents_hidden_included() {
    let env = task_env();
    let task = tool::tool("task").unwrap();
    let build = env.registry.get("build").unwrap();
    let text = task.description(build, &env.registry);
    let (_, listing) = text
        .split_once("Available agent types and the tools they have access to:\n")
        .unwrap();
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.strip_prefix("- ").unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["general", "explore", "helper", "bare", "pinned"]
    );
    assert!(listing.contains("- helper: Helps quietly.\n"));
    assert!(
        listing.contains("- bare: This subagent should only be called manually by the user.\n")
    );
    assert!(!listing.contains("secret"));
    assert!(text.contains("in parallel"));
    // Another caller without the deny sees `secret`.
    let plan = env.registry.get("plan").unwrap();
    assert!(
        task.description(plan, &env.registry)
            .contains("- secret: Not for build.")
    );
}

#[tokio::test]
async fn task_runs_the_subagent_and_formats_the_result() {
    let env = task_env();
    let out = env
        .run(
            "task",
            json!({"description": "Find files", "prompt": "Find the config files", "subagent_type": "general", "task_id": "ses_previous", "command": "scan"}),
        )
        .await
        .unwrap();
    let child = env.delegate.child.to_string();
    assert_eq!(
        out.output,
        format!(
            "All done: 3 files found.\n\n<task_metadata>\nsession_id: {child}\n</task_metadata>"
        )
    );
    assert_eq!(out.title, "Find files");
    assert_eq!(out.metadata["sessionId"], child);
    assert_eq!(
        out.metadata["model"],
        json!({"providerID": "caller", "modelID": "caller-model"})
    );
    assert_eq!(out.metadata.to_json()["summary"][0]["tool"], "grep");
    assert_eq!(
        out.metadata.summary().map(|s| s[0].state.status),
        Some(ToolStatus::Completed)
    );
    assert_eq!(out.metadata["truncated"], false);

    let requests = env.requests();
    assert_eq!(
        requests,
        vec![SubagentRequest {
            description: "Find files".into(),
            prompt: "Find the config files".into(),
            agent: "general".into(),
            session_id: Some("ses_previous".into()),
            command: Some("scan".into()),
            model: ModelRef::new("caller", "caller-model"),
            timeout: None,
        }]
    );
    let asks = env.asks();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].permission, "task");
    assert_eq!(asks[0].patterns, vec!["general"]);
    assert_eq!(asks[0].always, vec!["*"]);
    assert_eq!(asks[0].metadata["subagent_type"], "general");
    assert_eq!(asks[0].metadata["description"], "Find files");

    // Live metadata: the title and model before the child ran.
    let live = env.host.metadata.lock().unwrap().clone();
    assert_eq!(live[0].0.as_deref(), Some("Find files"));
    assert_eq!(live[0].1["model"]["modelID"], "caller-model");
    assert!(live[0].1.get("sessionId").is_none());
}

#[tokio::test]
async fn task_uses_the_agents_own_model() {
    let env = task_env();
    let out = env
        .run("task", json!({"description": "d", "prompt": "p", "subagent_type": "pinned", "session_id": "ses_x"}))
        .await
        .unwrap();
    assert_eq!(
        out.metadata["model"],
        json!({"providerID": "special", "modelID": "pinned-model"})
    );
    let metadata = out.metadata.to_json();
    let details = &metadata["details"];
    assert_eq!(details["mode"], "single");
    assert_eq!(details["results"][0]["agent"], "pinned");
    assert_eq!(details["results"][0]["task"], "p");
    assert_eq!(details["results"][0]["exitCode"], 0);
    assert_eq!(details["results"][0]["output"], "All done: 3 files found.");
    let request = env.requests().pop().unwrap();
    assert_eq!(request.model, ModelRef::new("special", "pinned-model"));
    assert_eq!(request.session_id.as_deref(), Some("ses_x"));
}

#[tokio::test]
async fn task_unknown_agent_fails_without_delegating() {
    let env = task_env();
    let err = err_text(
        env.run(
            "task",
            json!({"description": "d", "prompt": "p", "subagent_type": "nobody"}),
        )
        .await,
    );
    assert_eq!(
        err,
        "UNKNOWN_AGENT: Unknown agent type: nobody is not a valid agent type"
    );
    assert!(env.requests().is_empty());
    // The permission check comes first.
    assert_eq!(env.asks()[0].patterns, vec!["nobody"]);
}

#[tokio::test]
async fn task_permission_is_asked_unless_bypassed() {
    let env = Env::with(
        AGENTS,
        vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("task", "general", Action::Deny),
        ],
    );
    let args = json!({"description": "d", "prompt": "p", "subagent_type": "general"});
    let err = env.run("task", args.clone()).await.unwrap_err();
    assert!(
        matches!(
            err.cause(),
            ToolError::Permission(PermissionError::Denied { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().starts_with("PERMISSION_DENIED: "), "{err}");
    assert!(env.requests().is_empty());

    let mut ctx = env.ctx();
    ctx.bypass_agent_check = true;
    let task = tool::tool("task").unwrap();
    run_tool(task.as_ref(), args.clone(), &ctx).await.unwrap();
    assert_eq!(env.asks().len(), 1, "no ask when bypassed");
    assert_eq!(env.requests().len(), 1);

    ctx.delegate = None;
    let err = run_tool(task.as_ref(), args, &ctx).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "SUBAGENTS_DISABLED: subagents are not available here"
    );
}
