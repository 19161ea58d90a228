//! What a newcomer meets in `taskforce run`: the answer streaming on stdout, retries on the
//! live view, the message from stdin, attached files, and a busy session waiting its turn.

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::Duration;

use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::script::last_content;

use super::run_cli::{configure, peek_via_general};
use super::support::{Sandbox, interrupt};

/// Reads `from` until its text holds `needle`; answers the text read.
fn read_until(from: &mut impl Read, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        let n = from.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "ended before {needle:?}: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_streams_on_stdout_before_the_turn_ends() {
    // The model sends two words, then nothing: the run is still going when they show.
    let fake = FakeOpenAi::start(|_| Response::text("first words then a stall").stall_after(3))
        .await
        .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let mut child = s
        .command(&["run", "talk"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let seen = tokio::task::spawn_blocking(move || read_until(&mut stdout, "first words "))
        .await
        .unwrap();
    assert_eq!(seen, "first words ");
    assert!(child.try_wait().unwrap().is_none(), "the run ended early");
    let out = interrupt(child).await;
    assert_eq!(out.status.code(), Some(130));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_holds_the_whole_answer_once_and_no_escape_codes_when_piped() {
    let fake = FakeOpenAi::start(|req| {
        peek_via_general(req, "All good: the project builds.", || {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("c1", "bash", r#"{"command":"echo peeked"}"#)])
            } else {
                Response::text("child saw things")
            }
        })
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let (out, quiet) = tokio::task::spawn_blocking(move || {
        (
            s.run(&["run", "--yes", "check"]),
            s.run(&["run", "--quiet", "--yes", "check"]),
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "All good: the project builds.\n");
    assert!(
        !out.stdout.contains('\x1b') && !out.stderr.contains('\x1b'),
        "{:?}",
        out.stderr
    );
    // The child's one bash call is counted once, though its task part is updated many times.
    assert!(
        out.stderr.contains("@general · Peek done (1 tool call)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("→ bash echo peeked").count(),
        1,
        "{}",
        out.stderr
    );
    // Quiet: the same answer, and no live view.
    assert_eq!(quiet.status, 0, "{}", quiet.stderr);
    assert_eq!(quiet.stdout, "All good: the project builds.\n");
    assert!(!quiet.stderr.contains("@general"), "{}", quiet.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_provider_shows_each_retry_and_the_error_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let s = Sandbox::new();
    configure(&s, &format!("http://127.0.0.1:{port}/v1"));
    let config = std::fs::read_to_string(s.project.join("taskforce.toml")).unwrap();
    s.file("taskforce.toml", &format!("{config}max_retries = 1\n"));
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "hello"]))
        .await
        .unwrap();
    assert_eq!(out.status, 1, "{}", out.stderr);
    let cause = format!("connection refused to http://127.0.0.1:{port}/v1/chat/completions");
    assert!(
        out.stderr.contains(&format!(
            "retrying in 2 s, attempt 1/1: connection to fake failed: {cause}"
        )),
        "{}",
        out.stderr
    );
    // The retry line, then the final error, whole, once.
    assert_eq!(out.stderr.matches(&cause).count(), 2, "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .last()
            .is_some_and(|l| l == format!("error: APIError: connection to fake failed: {cause}")),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "");
}

#[test]
fn the_message_comes_from_stdin_when_none_is_given() {
    let s = Sandbox::new();
    let mut child = s
        .command(&["run", "--model", "scripted/echo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"hello from a pipe\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from a pipe\n");
    // Neither arguments nor anything on stdin.
    let err = s.usage_error(&["run", "--model", "scripted/echo"]);
    assert!(err.contains("no message"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_files_reach_the_model_and_a_missing_one_is_a_usage_error() {
    let fake = FakeOpenAi::start(|_| Response::text("read it"))
        .await
        .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    s.file("notes/plan.txt", "the secret plan is to ship on friday\n");
    let (ok, missing, s) = tokio::task::spawn_blocking(move || {
        let ok = s.run(&["run", "-f", "notes/plan.txt", "summarize", "this"]);
        let missing = s.run(&["run", "--file", "notes/gone.txt", "summarize"]);
        (ok, missing, s)
    })
    .await
    .unwrap();
    assert_eq!(ok.status, 0, "{}", ok.stderr);
    assert_eq!(ok.stdout, "read it\n");
    let request = &fake.requests()[0];
    assert!(request.contains("summarize this"));
    assert!(request.contains("the secret plan is to ship on friday"));
    assert_eq!(missing.status, 2, "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains("--file notes/gone.txt: no such file or directory"),
        "{}",
        missing.stderr
    );
    // Only the first run stored a session.
    let list = s.ok(&["sessions", "list", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_of_a_busy_session_waits_its_turn() {
    let fake = FakeOpenAi::start(|req| {
        let last = last_content(req);
        if last.contains("first") {
            // Slow, so that the second run starts while this one streams.
            Response::text("answer one").with_delay(Duration::from_millis(700))
        } else if last.contains("second") {
            Response::text("answer two")
        } else {
            Response::text("ready")
        }
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let (s, setup) = tokio::task::spawn_blocking(move || {
        let out = s.ok(&["run", "start"]);
        (s, out)
    })
    .await
    .unwrap();
    let session = setup
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap()
        .to_string();
    let first = s
        .command(&["run", "--session", &session, "first"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(fake.wait_for_requests(2, Duration::from_secs(20)).await);
    let mut second = s
        .command(&["run", "--session", &session, "second"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = second.stderr.take().unwrap();
    let queued = format!("queued: session {session} is busy");
    let line = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stderr).lines();
        let line = lines.next().unwrap().unwrap();
        // Keep reading, so that the run never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        line
    })
    .await
    .unwrap();
    assert!(line.starts_with(&queued), "{line}");
    let (first, second) = tokio::task::spawn_blocking(move || {
        (
            first.wait_with_output().unwrap(),
            second.wait_with_output().unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(first.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&first.stdout), "answer one\n");
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&second.stdout), "answer two\n");
    // The second prompt was sent after the first answer was whole: no interleaving.
    let asked_second = fake
        .requests()
        .into_iter()
        .find(|r| last_content(r).contains("second"))
        .unwrap();
    assert!(asked_second.contains("answer one"));
    let shown = s.ok(&["sessions", "show", &session, "--json"]).json();
    let roles: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["info"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
}
