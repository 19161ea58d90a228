//! Slash commands from real configuration: built-ins, markdown commands, and a template taken
//! through expansion, shell substitution and `@` references to the pieces of a prompt.

use taskforce_agents::command::{
    CommandSource, Commands, PromptPiece, Reference, ShellContext, ShellGate, expand, file_pieces,
    find_references, render,
};
use taskforce_agents::permission::{Action, PermissionAsk, PermissionError, Rule};
use taskforce_agents::tool::BashScope;

use super::fixture::Fixture;

/// Allows every command of a template.
struct AllowAll;

#[async_trait::async_trait]
impl ShellGate for AllowAll {
    async fn ask(&self, _ask: PermissionAsk) -> Result<(), PermissionError> {
        Ok(())
    }
}

#[test]
fn builtins_come_before_markdown_commands_and_can_be_replaced() {
    let f = Fixture::new();
    f.project_file(
        ".taskforce/command/greet.md",
        "---\ndescription: Greets\n---\nSay hello to $1",
    );
    let commands = Commands::new(&f.load().config);
    let names: Vec<&str> = commands.list().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["review", "init", "greet"]);
    let review = commands.get("review").unwrap();
    assert_eq!(review.source, CommandSource::Command);
    assert_eq!(review.subtask, Some(true));
    assert_eq!(
        review.description.as_deref(),
        Some("review changes [commit|branch|pr], defaults to uncommitted")
    );
    assert_eq!(review.hints, ["$ARGUMENTS"]);
    assert!(
        expand(&review.template, "main").contains("What to review: main"),
        "{}",
        review.template
    );

    f.project_file(
        ".taskforce/command/review.md",
        "---\ndescription: Mine\n---\nReview $1 quickly",
    );
    let commands = Commands::new(&f.load().config);
    let names: Vec<&str> = commands.list().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["review", "init", "greet"]);
    let review = commands.get("review").unwrap();
    assert_eq!(review.template, "Review $1 quickly");
    assert_eq!(review.description.as_deref(), Some("Mine"));
    assert_eq!(review.subtask, None);
    assert_eq!(review.hints, ["$1"]);
}

#[tokio::test]
async fn a_command_template_becomes_prompt_pieces() {
    let f = Fixture::new();
    let file = f.project_file("src/lib.rs", "pub fn add() {}\n");
    f.project_file("docs/guide.md", "# Guide\n");
    let notes = f.home_file("notes.txt", "remember\n");
    f.project_file(
        ".taskforce/command/check.md",
        "---\ndescription: Check\n---\nCheck @$1 with @general (files: !`ls src`), see @~/notes.txt and @docs. Mail me@x.com, not `@docs`.",
    );
    let registry = f.registry();
    let commands = Commands::new(&f.load().config);

    let gate = AllowAll;
    let rules = vec![Rule::new("*", "*", Action::Allow)];
    let shell = ShellContext {
        scope: BashScope {
            directory: &f.project,
            project_root: &f.project,
            home: Some(&f.home),
            rules: &rules,
        },
        gate: &gate,
    };
    let prompt = render(
        &commands.get("check").unwrap().template,
        "src/lib.rs",
        shell,
    )
    .await;
    assert_eq!(
        prompt,
        "Check @src/lib.rs with @general (files: lib.rs), see @~/notes.txt and @docs. Mail me@x.com, not `@docs`."
    );

    let references = find_references(&prompt, &f.project, Some(&f.home), |name| {
        registry.get(name).is_some()
    });
    assert_eq!(
        references,
        [
            Reference::File(file.clone()),
            Reference::Agent("general".into()),
            Reference::File(notes.clone()),
            Reference::Directory(f.project.join("docs")),
        ]
    );

    let pieces = file_pieces(&references[0], &f.project).await;
    assert_eq!(
        pieces,
        [
            PromptPiece::Text {
                text: format!(
                    "Called the Read tool with the following input: {{\"filePath\":\"{}\"}}",
                    file.display()
                ),
                synthetic: true,
            },
            PromptPiece::Text {
                text: "<file>\n00001| pub fn add() {}\n\n(End of file - total 1 lines)\n</file>"
                    .into(),
                synthetic: true,
            },
            PromptPiece::File {
                mime: "text/plain".into(),
                url: format!("file://{}", file.display()),
                filename: "lib.rs".into(),
            },
        ]
    );
    assert!(file_pieces(&references[1], &f.project).await.is_empty());
    let home_pieces = file_pieces(&references[2], &f.project).await;
    assert!(
        matches!(&home_pieces[1], PromptPiece::Text { text, .. } if text.contains("00001| remember")),
        "{home_pieces:?}"
    );
    let dir_pieces = file_pieces(&references[3], &f.project).await;
    assert_eq!(
        dir_pieces[1],
        PromptPiece::Text {
            text: format!("{}/\n  guide.md\n", f.project.join("docs").display()),
            synthetic: true,
        }
    );
    assert!(
        matches!(&dir_pieces[2], PromptPiece::File { mime, filename, .. }
            if mime == "application/x-directory" && filename == "docs")
    );
}
