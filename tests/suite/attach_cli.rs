//! `taskforce run --attach URL` against a real `taskforce serve` in another process: the answer
//! on stdout, the tree live on stderr, sessions continued, permission asks answered, Ctrl-C
//! aborting on the server, and clear errors for what is not there.

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use taskforce_agents::id::SessionId;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::last_content;

use super::run_cli::{bash_asker, configure, peek_via_general};
use super::stop_cli::{runs, sleeper_model, sleeper_pid};
use super::support::{Output, Sandbox, interrupt, spawn_serve};

/// A `taskforce serve` process, killed when dropped.
struct Served {
    process: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A sandbox whose model is `fake`, with `extra` appended to its configuration and `files` in
/// its project, served.
async fn served_with(
    fake: &FakeOpenAi,
    extra: &str,
    files: &[(&str, &str)],
) -> (Arc<Sandbox>, Served) {
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let config = std::fs::read_to_string(s.project.join("taskforce.toml")).unwrap();
    s.file("taskforce.toml", &format!("{config}{extra}"));
    for (rel, text) in files {
        s.file(rel, text);
    }
    let (process, base) = spawn_serve(&s).await;
    (Arc::new(s), Served { process, base })
}

/// A sandbox whose model is `fake`, with `extra` appended to its configuration, served.
async fn served(fake: &FakeOpenAi, extra: &str) -> (Arc<Sandbox>, Served) {
    served_with(fake, extra, &[]).await
}

/// Runs the binary with `args` in the sandbox, off the test's threads.
async fn run(s: &Arc<Sandbox>, args: &[&str]) -> Output {
    let s = s.clone();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        s.run(&args)
    })
    .await
    .unwrap()
}

/// The session a run names on its last lines.
fn session_of(out: &Output) -> String {
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("no session line: {}", out.stderr))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_run_prints_the_answer_and_shows_the_child_live() {
    let fake = FakeOpenAi::start(|req| {
        peek_via_general(req, "All good.", || Response::text("child saw things"))
    })
    .await
    .unwrap();
    let (s, server) = served(&fake, "").await;
    let out = run(&s, &["run", "--attach", &server.base, "check the project"]).await;
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "All good.\n");
    assert!(
        out.stderr.contains("@general · Peek"),
        "live view: {}",
        out.stderr
    );
    assert!(out.stderr.contains("done (0 tool calls)"), "{}", out.stderr);
    assert!(session_of(&out).starts_with("ses_"));

    let json = run(
        &s,
        &["run", "--attach", &server.base, "--format", "json", "again"],
    )
    .await;
    assert_eq!(json.status, 0, "stderr: {}", json.stderr);
    let events: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(types.contains(&"session.created"), "{types:?}");
    assert!(types.contains(&"message.part.updated"), "{types:?}");
    assert_eq!(types.last(), Some(&"session.idle"), "{types:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_run_continues_a_session_with_its_history() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if !req.contains("which word") {
            Response::text("the word is teapot")
        } else if req.contains("the word is teapot") {
            Response::text("teapot")
        } else {
            Response::text("no idea")
        }
    })
    .await
    .unwrap();
    let (s, server) = served(&fake, "").await;
    let first = run(&s, &["run", "--attach", &server.base, "remember a word"]).await;
    assert_eq!(first.status, 0, "stderr: {}", first.stderr);
    assert_eq!(first.stdout.trim(), "the word is teapot");
    let session = session_of(&first);
    let second = run(
        &s,
        &[
            "run",
            "--attach",
            &server.base,
            "--session",
            &session,
            "which word was it?",
        ],
    )
    .await;
    assert_eq!(second.status, 0, "stderr: {}", second.stderr);
    assert_eq!(second.stdout, "teapot\n");
    assert_eq!(session_of(&second), session);
    let last = fake.requests().pop().expect("the second model request");
    assert!(last.contains("the word is teapot"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_and_an_unreachable_server_are_usage_errors_naming_them() {
    let fake = FakeOpenAi::start(|_| Response::text("unused"))
        .await
        .unwrap();
    let (s, server) = served(&fake, "").await;
    let missing = SessionId::new().to_string();
    let out = run(
        &s,
        &[
            "run",
            "--attach",
            &server.base,
            "--session",
            &missing,
            "hello",
        ],
    )
    .await;
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("no session {missing} on {}", server.base)),
        "{}",
        out.stderr
    );

    // A port nobody listens on (just released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("http://127.0.0.1:{port}");
    let out = run(&s, &["run", "--attach", &nowhere, "hello"]).await;
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("error: no server answers at {nowhere}")),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    let out = run(
        &s,
        &["run", "--attach", &server.base, "--agent", "nope", "hello"],
    )
    .await;
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("unknown agent \"nope\" on"),
        "{}",
        out.stderr
    );
    assert!(fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_run_sends_files_references_and_slash_commands() {
    let fake = FakeOpenAi::start(|req| {
        Response::text(if last_content(req).contains("Say hello to Ada") {
            "Hello, Ada!"
        } else if req.contains("the other secret is 7") {
            "found the other secret"
        } else if req.contains("the secret is 42") {
            "found the secret"
        } else {
            "?"
        })
    })
    .await
    .unwrap();
    let (s, server) = served_with(
        &fake,
        "",
        &[
            (
                ".taskforce/command/greet.md",
                "---\ndescription: Greets\n---\nSay hello to $1",
            ),
            ("notes/secret.txt", "the secret is 42\n"),
            ("notes/other.txt", "the other secret is 7\n"),
        ],
    )
    .await;
    let greeted = run(&s, &["run", "--attach", &server.base, "/greet", "Ada"]).await;
    assert_eq!(greeted.status, 0, "{}", greeted.stderr);
    assert_eq!(greeted.stdout, "Hello, Ada!\n");
    let unknown = run(&s, &["run", "--attach", &server.base, "/nope"]).await;
    assert_eq!(unknown.status, 2, "{}", unknown.stderr);
    assert!(
        unknown
            .stderr
            .contains("unknown command \"/nope\"; known commands: review, init, greet"),
        "{}",
        unknown.stderr
    );
    let read = run(
        &s,
        &[
            "run",
            "--attach",
            &server.base,
            "-f",
            "notes/secret.txt",
            "what does it say?",
        ],
    )
    .await;
    assert_eq!(read.status, 0, "{}", read.stderr);
    assert_eq!(read.stdout, "found the secret\n");
    let referenced = run(
        &s,
        &[
            "run",
            "--attach",
            &server.base,
            "what does @notes/other.txt say?",
        ],
    )
    .await;
    assert_eq!(referenced.status, 0, "{}", referenced.stderr);
    assert_eq!(referenced.stdout, "found the other secret\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_run_answers_the_trees_permission_asks() {
    let fake = bash_asker().await;
    let (s, server) = served(&fake, "[permission]\nbash = \"ask\"\n").await;
    let refused = run(&s, &["run", "--attach", &server.base, "list files"]).await;
    assert_eq!(refused.status, 0, "{}", refused.stderr);
    assert_eq!(refused.stdout.trim(), "bash was refused");
    assert!(
        refused.stderr.contains(
            r#"denied: build asks: bash "echo from-bash" (not interactive; pass --yes to allow)"#
        ),
        "{}",
        refused.stderr
    );
    let allowed = run(
        &s,
        &["run", "--attach", &server.base, "--yes", "list files"],
    )
    .await;
    assert_eq!(allowed.status, 0, "{}", allowed.stderr);
    assert_eq!(allowed.stdout.trim(), "bash ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_aborts_the_attached_run_on_the_server_and_exits_130() {
    let fake = sleeper_model().await;
    let (s, server) = served(&fake, "").await;
    let child = s
        .command(&["run", "--attach", &server.base, "--yes", "sleep"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sleeper = sleeper_pid(&s.project).await;
    let out = tokio::time::timeout(Duration::from_secs(15), interrupt(child))
        .await
        .expect("the run ends after Ctrl-C");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted: aborting the session on the server"),
        "{stderr}"
    );
    // The server cancelled the tree: its bash command is gone while the server runs on.
    taskforce_testkit::eventually("the aborted command to end", || !runs(sleeper)).await;
    let health = reqwest::get(format!("{}/global/health", server.base))
        .await
        .unwrap();
    assert!(health.status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_run_sends_the_servers_password() {
    let fake = FakeOpenAi::start(|_| Response::text("let in"))
        .await
        .unwrap();
    let mut s = Sandbox::new();
    configure(&s, &fake.base_url());
    s.env("TASKFORCE_SERVER_PASSWORD", "sekrit");
    let (process, base) = spawn_serve(&s).await;
    let server = Served { process, base };
    let s = Arc::new(s);
    let ok = run(&s, &["run", "--attach", &server.base, "hello"]).await;
    assert_eq!(ok.status, 0, "{}", ok.stderr);
    assert_eq!(ok.stdout, "let in\n");
    let mut wrong = s.command(&["run", "--attach", &server.base, "hello"]);
    wrong.env("TASKFORCE_SERVER_PASSWORD", "wrong");
    let wrong = tokio::task::spawn_blocking(move || wrong.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the server at {} refused the password",
            server.base
        )),
        "{stderr}"
    );
}
