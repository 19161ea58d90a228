//! Skills end to end: a scripted model (the fake OpenAI-compatible server) is told about the
//! project's skills in the `skill` tool's description, loads one, and reads its instructions;
//! a skill the rules deny is neither listed nor loaded, not even through a subagent.

use taskforce_actors::PromptInput;
use taskforce_agents::model::ToolState;
use taskforce_testkit::fake_openai::FakeOpenAi;
use taskforce_testkit::script::{call_then, skill};

use super::delegated_permissions::{
    assert_denied, descendant, finished, go, guarded, run_root, tool_error, tree,
};
use super::runtime::{Env, tool_parts};

const DENY_INTERNAL: &str = "[permission.skill]\n\"internal-*\" = \"deny\"\n";

/// A project with a `release` skill (and a script beside it) and an `internal-db` skill.
fn project(fake: &FakeOpenAi, extra: &str) -> Env {
    let env = Env::new(&fake.base_url(), extra);
    env.file(
        ".taskforce/skills/release/SKILL.md",
        "---\nname: release\ndescription: Cut a release of the project\n---\n\nRun scripts/release.sh, then tag.\n",
    );
    env.file(
        ".taskforce/skills/release/scripts/release.sh",
        "echo released\n",
    );
    env.file(
        ".claude/skills/internal-db/SKILL.md",
        "---\nname: internal-db\ndescription: Poke the production database\n---\nSecret steps.\n",
    );
    env
}

#[actix_rt::test]
async fn a_model_is_told_about_the_skills_and_loads_one() {
    let fake = FakeOpenAi::start(call_then(skill("release"), "released"))
        .await
        .unwrap();
    let env = project(&fake, DENY_INTERNAL);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    finished(go(&rt, &s.id, PromptInput::text("ship it"))).await;

    let requests = fake.requests();
    let offered = requests[0]
        .tool_description("skill")
        .expect("the skill tool is offered");
    assert!(
        offered.contains(
            "<name>release</name>\n    <description>Cut a release of the project</description>"
        ),
        "{offered}"
    );
    assert!(
        !offered.contains("internal-db"),
        "a denied skill is not listed: {offered}"
    );

    let parts = tool_parts(&rt, &s.id).await;
    let [(tool, ToolState::Completed(done))] = parts.as_slice() else {
        panic!("one completed skill call: {parts:?}")
    };
    assert_eq!(tool, "skill");
    assert_eq!(done.title, "Loaded skill: release");
    let dir = env.project().join(".taskforce/skills/release");
    assert!(
        done.output.starts_with(
            "<skill_content name=\"release\">\n# Skill: release\n\nRun scripts/release.sh, then tag.\n\nBase directory for this skill: file://"
        ),
        "{}",
        done.output
    );
    assert!(
        done.output.contains(&format!(
            "<file>{}</file>",
            dir.join("scripts/release.sh").display()
        )),
        "{}",
        done.output
    );
    // The model read the instructions in its next step.
    assert!(requests[1].contains("Run scripts/release.sh, then tag."));
}

#[actix_rt::test]
async fn a_denied_skill_is_refused_when_called_anyway() {
    let fake = FakeOpenAi::start(call_then(skill("internal-db"), "gave up"))
        .await
        .unwrap();
    let env = project(&fake, DENY_INTERNAL);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    finished(go(&rt, &s.id, PromptInput::text("poke the db"))).await;
    assert_denied(&tool_error(&rt, &s.id, "skill").await, "skill");
    assert!(!fake.requests()[1].contains("Secret steps."));
}

#[actix_rt::test]
async fn a_skill_its_caller_denies_is_refused_to_a_subagent() {
    let fake = FakeOpenAi::start(tree(1, || skill("internal-db")))
        .await
        .unwrap();
    let env = project(&fake, &guarded("{ skill = { \"internal-*\" = \"deny\" } }"));
    let rt = env.runtime().await;
    let root = run_root(&rt).await;
    let child = descendant(&rt, &root, 1).await;
    assert_denied(&tool_error(&rt, &child, "skill").await, "skill");
    assert!(
        !fake.requests().iter().any(|r| r.contains("Secret steps.")),
        "the skill's body never reached a model"
    );
}
