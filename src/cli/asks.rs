//! Permission asks and questions during a run: asks are allowed with `--yes`, asked on the
//! terminal when the run is interactive, else refused with a message that says how to allow
//! them; questions are asked on the terminal when the run is interactive, else dismissed with a
//! message. The same for a run in this process and a run on a server (`run --attach`).

use std::io::{BufRead, Write};

use taskforce_actors::Runtime;
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_actors::question::{QuestionAnswer, QuestionInfo, QuestionRequest};

/// Answers `request` on `runtime`: allowed once with `yes`, asked on the terminal when
/// `interactive`, else refused (and said so on stderr).
pub(super) async fn answer(
    runtime: &Runtime,
    request: &PermissionRequest,
    yes: bool,
    interactive: bool,
) {
    let (reply, message) = decide(request, yes, interactive).await;
    runtime.reply_permission(&request.id, reply, message).await;
}

/// The reply to `request` and the message for the model: allowed once with `yes`, asked on
/// the terminal when `interactive`, else refused (and said so on stderr).
pub(super) async fn decide(
    request: &PermissionRequest,
    yes: bool,
    interactive: bool,
) -> (PermissionReply, Option<String>) {
    if yes {
        return (PermissionReply::Once, None);
    }
    if interactive {
        return ask_terminal(request.clone()).await;
    }
    eprintln!(
        "denied: {} (not interactive; pass --yes to allow)",
        describe_ask(request)
    );
    (
        PermissionReply::Reject,
        Some(format!(
            "permission `{}` for {:?} needs approval and this run is not interactive; rerun with --yes to allow it, or allow it in the config",
            request.permission, request.patterns
        )),
    )
}

/// Answers `request` on `runtime` (see [`decide_question`]).
pub(super) async fn answer_question(
    runtime: &Runtime,
    request: &QuestionRequest,
    interactive: bool,
) {
    match decide_question(request, interactive).await {
        Some(answers) => {
            if let Err(e) = runtime.reply_question(&request.id, answers).await {
                eprintln!("the answer was refused: {e}");
                runtime.reject_question(&request.id).await;
            }
        }
        None => {
            runtime.reject_question(&request.id).await;
        }
    }
}

/// The answers to `request`, asked on the terminal when `interactive`; none (dismiss it) when
/// the run is not interactive (said so on stderr) or the person gives no answer.
pub(super) async fn decide_question(
    request: &QuestionRequest,
    interactive: bool,
) -> Option<Vec<QuestionAnswer>> {
    let asker = if request.path.is_empty() {
        "the agent".to_string()
    } else {
        request.path.join(" › ")
    };
    if !interactive {
        let asked: Vec<&str> = request
            .questions
            .iter()
            .map(|q| q.question.as_str())
            .collect();
        eprintln!("dismissed: {asker} asks {asked:?} (not interactive; nobody can answer)");
        return None;
    }
    let request = request.clone();
    tokio::task::spawn_blocking(move || {
        let mut answers = Vec::with_capacity(request.questions.len());
        for question in &request.questions {
            eprintln!("{asker} asks: {}", question_text(question));
            eprint!("{}", choice_prompt(question));
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            answers.push(parse_choice(question, &line)?);
        }
        Some(answers)
    })
    .await
    .ok()
    .flatten()
}

/// A question and its numbered choices, for the terminal.
fn question_text(question: &QuestionInfo) -> String {
    let mut text = format!("[{}] {}", question.header, question.question);
    for (i, option) in question.options.iter().enumerate() {
        text.push_str(&format!(
            "\n  {}. {} — {}",
            i + 1,
            option.label,
            option.description
        ));
    }
    text
}

/// What the terminal asks for.
fn choice_prompt(question: &QuestionInfo) -> String {
    let pick = if question.is_multiple() {
        "numbers separated by commas"
    } else {
        "a number"
    };
    let own = if question.allows_custom() {
        ", or type your own answer"
    } else {
        ""
    };
    format!("answer with {pick}{own} (empty: dismiss): ")
}

/// The labels a typed line picks: choice numbers, else the text itself when the question takes
/// answers of one's own; none for an empty line or a choice that does not exist.
fn parse_choice(question: &QuestionInfo, line: &str) -> Option<QuestionAnswer> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let numbers: Option<Vec<usize>> = line
        .split(',')
        .map(|n| n.trim().parse::<usize>().ok())
        .collect();
    match numbers {
        Some(numbers) if question.is_multiple() || numbers.len() == 1 => numbers
            .iter()
            .map(|&n| {
                n.checked_sub(1)
                    .and_then(|i| question.options.get(i))
                    .map(|o| o.label.clone())
            })
            .collect(),
        _ if question.allows_custom() => Some(vec![line.to_string()]),
        _ => None,
    }
}

/// Who asks for what, for people: `build › explore asks: bash "ls"` (the agents from the
/// run's root session down to the asking one, then the permission and its patterns).
fn describe_ask(request: &PermissionRequest) -> String {
    let patterns: Vec<String> = request.patterns.iter().map(|p| format!("{p:?}")).collect();
    let what = format!("{} {}", request.permission, patterns.join(", "));
    if request.path.is_empty() {
        what
    } else {
        format!("{} asks: {what}", request.path.join(" › "))
    }
}

/// Asks on the terminal: once, always, or reject.
async fn ask_terminal(request: PermissionRequest) -> (PermissionReply, Option<String>) {
    tokio::task::spawn_blocking(move || {
        eprint!(
            "{} (allow? [y]es once / [a]lways / [n]o): ",
            describe_ask(&request)
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        match line.trim().to_lowercase().as_str() {
            "y" | "yes" => (PermissionReply::Once, None),
            "a" | "always" => (PermissionReply::Always, None),
            _ => (PermissionReply::Reject, None),
        }
    })
    .await
    .unwrap_or((PermissionReply::Reject, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskforce_agents::id::{PermissionId, SessionId};

    fn request(path: &[&str], patterns: &[&str]) -> PermissionRequest {
        let session = SessionId::new();
        PermissionRequest {
            id: PermissionId::new(),
            session_id: session.clone(),
            permission: "bash".into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            metadata: Default::default(),
            always: Vec::new(),
            tool: None,
            root_session_id: session,
            path: path.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn color(multiple: bool, custom: bool) -> QuestionInfo {
        serde_json::from_value(serde_json::json!({
            "question": "Which color?", "header": "Color",
            "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
            "multiple": multiple, "custom": custom
        }))
        .unwrap()
    }

    #[test]
    fn a_typed_line_picks_choices_by_number_or_answers_in_its_own_words() {
        let one = color(false, true);
        assert_eq!(parse_choice(&one, "2\n"), Some(vec!["Blue".to_string()]));
        assert_eq!(parse_choice(&one, "green"), Some(vec!["green".to_string()]));
        assert_eq!(parse_choice(&one, "1,2"), Some(vec!["1,2".to_string()]));
        assert_eq!(parse_choice(&one, "  "), None);
        assert_eq!(parse_choice(&one, "3"), None, "no third choice");
        let many = color(true, false);
        assert_eq!(
            parse_choice(&many, "2, 1"),
            Some(vec!["Blue".to_string(), "Red".to_string()])
        );
        assert_eq!(
            parse_choice(&many, "green"),
            None,
            "no answers of one's own"
        );
        assert!(question_text(&one).contains("2. Blue — cool"));
        assert!(choice_prompt(&many).contains("commas"));
    }

    #[test]
    fn an_ask_names_the_agents_down_to_the_asker() {
        assert_eq!(
            describe_ask(&request(&["build", "explore"], &["ls"])),
            r#"build › explore asks: bash "ls""#
        );
        assert_eq!(
            describe_ask(&request(&["build"], &["git status", "echo \"hi\""])),
            r#"build asks: bash "git status", "echo \"hi\"""#
        );
        assert_eq!(describe_ask(&request(&[], &["ls"])), r#"bash "ls""#);
    }
}
