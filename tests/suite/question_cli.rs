//! `taskforce run` when an agent asks the user a question: asked on the terminal when there is
//! one, dismissed with a message when there is not.

use serde_json::json;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::pty::Pty;
use taskforce_testkit::script::last_content;

use super::run_cli::configure;
use super::support::Sandbox;

/// Asks which color, then repeats what it heard.
fn asks_color(req: &RecordedRequest) -> Response {
    if req.last_role() == Some("tool") {
        return Response::text(&format!("heard: {}", last_content(req)));
    }
    let questions = json!({"questions": [{
        "question": "Which color?", "header": "Color",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]
    }]});
    Response::tool_calls(&[("call_q", "question", &questions.to_string())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_terminal_asks_the_question_there() {
    let fake = FakeOpenAi::start(asks_color).await.unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    tokio::task::spawn_blocking(move || {
        let mut command = s.command(&["run", "pick a color"]);
        command.env("TERM", "xterm-256color").env("NO_COLOR", "1");
        let mut pty = Pty::spawn(&command, 100, 30);
        pty.wait_for_text("Which color?");
        pty.wait_for_text("2. Blue — cool");
        pty.type_text("2\r");
        pty.wait_for_text("\"Which color?\"=\"Blue\"");
        assert!(pty.wait_exit().success(), "{}", pty.screen());
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_run_dismisses_questions_and_says_so() {
    let fake = FakeOpenAi::start(asks_color).await.unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "pick a color"]))
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "dismissed: build asks [\"Which color?\"] (not interactive; nobody can answer)"
        ),
        "{}",
        out.stderr
    );
    let asked_again = fake
        .requests()
        .iter()
        .filter(|r| r.last_role() == Some("tool"))
        .count();
    assert_eq!(asked_again, 0, "the run stopped at the dismissal");
}
