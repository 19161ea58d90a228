//! `Runtime::generate_agent`: a fake model designs an agent; the file it becomes loads as a
//! subagent; bad answers write nothing.

use taskforce_agents::agent::{GENERATE_PROMPT, Registry};
use taskforce_agents::config::{LoadOptions, load};
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};

use super::runtime::Env;

const ANSWER: &str = r#"{"identifier": "sql-reviewer", "whenToUse": "Use this agent when SQL migrations change.\n<example>\nuser: \"check: this migration\"\n</example>", "systemPrompt": "You are a SQL reviewer.\n\nCheck every join."}"#;

#[actix_rt::test]
async fn a_generated_agent_is_written_and_loads_as_a_subagent() {
    let fake = FakeOpenAi::queue(vec![Response::text(ANSWER)])
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let created = rt
        .generate_agent("reviews SQL migrations for unsafe joins", None)
        .await
        .unwrap();
    assert_eq!(created.agent.identifier, "sql-reviewer");
    assert!(created.path.ends_with(".taskforce/agent/sql-reviewer.md"));

    let request = &fake.requests()[0];
    assert!(request.contains("reviews SQL migrations for unsafe joins"));
    assert!(request.contains("must NOT be used"));
    assert!(request.contains("explore"), "existing names are excluded");
    assert!(request.contains(GENERATE_PROMPT.lines().next().unwrap()));
    assert!(request.tool_names().is_empty());

    let loaded = load(&LoadOptions {
        cwd: env.project(),
        config_file: None,
        data_dir: None,
        env: env.hermetic_env(),
    })
    .unwrap();
    let registry = Registry::new(&loaded.config, &loaded.paths).unwrap();
    let agent = registry.get("sql-reviewer").expect("the new agent loads");
    assert!(agent.is_subagent());
    assert_eq!(
        agent.description.as_deref(),
        Some(
            "Use this agent when SQL migrations change.\n<example>\nuser: \"check: this migration\"\n</example>"
        )
    );
    assert_eq!(
        agent.prompt.as_deref().map(str::trim),
        Some("You are a SQL reviewer.\n\nCheck every join.")
    );
}

#[actix_rt::test]
async fn taken_names_and_malformed_answers_write_nothing() {
    let fake = FakeOpenAi::queue(vec![
        Response::text(r#"{"identifier": "explore", "whenToUse": "w", "systemPrompt": "p"}"#),
        Response::text("I would call it SQL Reviewer."),
        Response::text(r#"{"identifier": "../../evil", "whenToUse": "w", "systemPrompt": "p"}"#),
    ])
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let taken = rt.generate_agent("explores", None).await.unwrap_err();
    assert!(
        taken
            .to_string()
            .contains("\"explore\", which is already an agent"),
        "{taken}"
    );
    let prose = rt.generate_agent("reviews SQL", None).await.unwrap_err();
    assert!(prose.to_string().contains("did not answer with"), "{prose}");
    let evil = rt.generate_agent("escapes", None).await.unwrap_err();
    assert!(evil.to_string().contains("identifier"), "{evil}");
    assert!(!env.project().join(".taskforce/agent").exists());
    let empty = rt.generate_agent("  ", None).await.unwrap_err();
    assert!(
        empty
            .to_string()
            .contains("describe what the agent should do")
    );
    assert_eq!(
        fake.requests().len(),
        3,
        "an empty description asks nothing"
    );
}
