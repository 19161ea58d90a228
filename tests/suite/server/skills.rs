//! `GET /skill`: the project's skills in OpenCode's shape (`{name, description, location,
//! content}`), invalid skill files left out.

use serde_json::json;

use super::{answers, array, harness};

#[tokio::test(flavor = "multi_thread")]
async fn skills_are_listed_by_name_in_opencodes_shape() {
    let h = harness()
        .file(
            ".opencode/skills/release/SKILL.md",
            "---\nname: release\ndescription: Cut a release\n---\n\nRun the script.\n",
        )
        .file(
            ".claude/skills/review/SKILL.md",
            "---\nname: review\ndescription: Review a change\nlicense: MIT\n---\nRead the diff.\n",
        )
        .file(".taskforce/skills/broken/SKILL.md", "---\nname: [\n---\n")
        .start(answers("unused"))
        .await;

    let skills = array(h.get("/skill").await.ok());
    let release = h.project.join(".opencode/skills/release/SKILL.md");
    let review = h.project.join(".claude/skills/review/SKILL.md");
    assert_eq!(
        skills,
        [
            json!({"name": "release", "description": "Cut a release",
                   "location": release.display().to_string(), "content": "Run the script."}),
            json!({"name": "review", "description": "Review a change",
                   "location": review.display().to_string(), "content": "Read the diff."}),
        ]
    );

    let same = format!("/skill?directory={}", h.project.display());
    assert_eq!(array(h.get(&same).await.ok()).len(), 2);
    let message = h
        .get("/skill?directory=/somewhere/else")
        .await
        .error(400, "BadRequest");
    assert!(message.contains("/somewhere/else"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_skills_is_an_empty_list() {
    let h = harness().start(answers("unused")).await;
    assert_eq!(
        array(h.get("/skill").await.ok()),
        Vec::<serde_json::Value>::new()
    );
}
