//! Commands every configuration has: `review` and `init`.
//!
//! A config table or markdown file with the same name replaces a built-in command.

use super::CommandConfig;

/// The name of the built-in review command.
pub const REVIEW: &str = "review";

/// The description of the built-in review command.
pub const REVIEW_DESCRIPTION: &str = "review changes [commit|branch|pr], defaults to uncommitted";

/// The template of the built-in review command.
pub const REVIEW_TEMPLATE: &str = r#"You are reviewing code changes. Review carefully and report what you find; do not modify any files.

What to review: $ARGUMENTS

Work out the changes from the line above:
- Nothing given: review the uncommitted changes, staged and unstaged (`git status`, `git diff HEAD`), including new untracked files.
- A commit hash: review that commit (`git show <hash>`).
- A branch name: review what the branch adds over the base branch it forked from (`git log --oneline <base>..<branch>`, `git diff <base>...<branch>`).
- `pr` (optionally followed by a number or URL): review the pull request's changes; use `gh pr diff` and `gh pr view` when the GitHub CLI is available, else diff the current branch against its base branch.

How to review:
1. Inspect the changes with git through the bash tool (`git diff`, `git log`, `git show`). Read-only commands only: never commit, check out, reset, stash or push.
2. Read every touched file, not only the diff hunks, so you understand the surrounding code, and look up the callers and definitions the change relies on.
3. Check correctness first: logic errors, unhandled edge cases and error paths, broken invariants, concurrency and resource problems, security issues (injection, secrets, unchecked input, unsafe file or network access), and behaviour changes callers will not expect.
4. Then check tests (missing or weak for the new behaviour), API and compatibility breaks, performance, and readability or consistency with the conventions of the surrounding code.
5. Prefer few real problems over many speculative ones. Verify a suspicion by reading the code before reporting it, and say how sure you are when you cannot.

Report your findings grouped by severity, most severe first:
- Critical: bugs, data loss, security holes; must be fixed before merging.
- Major: incorrect behaviour in some cases, missing tests for risky code, design problems.
- Minor: readability, naming, small inconsistencies.
- Nit: optional polish.

For each finding give a `path/to/file:line` reference, what is wrong, why it matters, and a concrete fix. Leave out empty severity groups. End with a short overall assessment of the change and whether it is ready to merge. If there are no changes to review, say so and stop."#;

/// The name of the built-in command that writes the project's `AGENTS.md`.
pub const INIT: &str = "init";

/// The description of the built-in init command.
pub const INIT_DESCRIPTION: &str = "create or update AGENTS.md for this project";

/// The template of the built-in init command.
pub const INIT_TEMPLATE: &str = r#"Study this project and write an `AGENTS.md` file at its root for the coding agents that will work here. If `AGENTS.md` already exists, improve it rather than starting over, and keep what is still true.

Find out, by reading the repository (build files, CI configuration, READMEs, existing tests and source):
1. How to build, lint, format and test the project, with the exact commands, including how to run one single test.
2. The code style the code actually follows: imports and module layout, formatting, naming, types, error handling, and the conventions for tests.
3. How the code is organised: the main parts, where they live and how they depend on each other, at the level a newcomer needs first.

Also fold in any rules already written for other tools (for example `CLAUDE.md`, `.cursorrules`, `.cursor/rules/`, `.github/copilot-instructions.md`), saying where each came from.

Keep it short and specific to this project, about 20 to 40 lines: commands in code blocks, no generic advice that would fit any project, nothing you have not checked in the repository. Write the file with your tools, then say in one or two sentences what it contains.

$ARGUMENTS"#;

/// The built-in commands, in listing order.
pub fn builtin_commands() -> Vec<(&'static str, CommandConfig)> {
    vec![
        (
            REVIEW,
            CommandConfig {
                template: REVIEW_TEMPLATE.to_string(),
                description: Some(REVIEW_DESCRIPTION.to_string()),
                agent: None,
                model: None,
                subtask: Some(true),
            },
        ),
        (
            INIT,
            CommandConfig {
                template: INIT_TEMPLATE.to_string(),
                description: Some(INIT_DESCRIPTION.to_string()),
                agent: None,
                model: None,
                subtask: Some(false),
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{expand, hints};

    #[test]
    fn review_is_a_subtask_that_takes_arguments() {
        let commands = builtin_commands();
        let names: Vec<&str> = commands.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["review", "init"]);
        let review = &commands[0].1;
        assert_eq!(review.subtask, Some(true));
        assert_eq!(
            review.description.as_deref(),
            Some("review changes [commit|branch|pr], defaults to uncommitted")
        );
        assert_eq!(hints(&review.template), ["$ARGUMENTS"]);
    }

    #[test]
    fn init_runs_in_the_session_and_asks_for_agents_md() {
        let commands = builtin_commands();
        let init = &commands[1].1;
        assert_eq!(commands[1].0, "init");
        assert_eq!(init.subtask, Some(false));
        let prompt = expand(INIT_TEMPLATE, "");
        assert!(prompt.contains("`AGENTS.md`"), "{prompt}");
        assert!(!prompt.contains("$ARGUMENTS"));
        assert!(
            expand(INIT_TEMPLATE, "mention the fuzz targets").ends_with("mention the fuzz targets")
        );
    }

    #[test]
    fn review_names_what_to_review() {
        let prompt = expand(REVIEW_TEMPLATE, "abc1234");
        assert!(prompt.contains("What to review: abc1234\n"), "{prompt}");
        let prompt = expand(REVIEW_TEMPLATE, "");
        assert!(prompt.contains("What to review: \n"), "{prompt}");
        assert!(prompt.contains("uncommitted changes"));
        assert!(!prompt.contains("$ARGUMENTS"));
        // No `` !`cmd` `` in the template: the reviewer runs git itself.
        assert!(!prompt.contains("!`"));
    }
}
