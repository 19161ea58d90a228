//! SIGTERM and SIGINT stop `taskforce serve` and `taskforce run` cleanly: within 5 s, with the
//! running bash command's processes killed, the run's cancelled end stored, and the runtime's
//! lock file gone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use taskforce_actors::store::{SessionFilter, SqliteStore, Store};
use taskforce_agents::model::ToolState;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

use super::run_cli::configure;
use super::support::{Sandbox, spawn_serve};

/// The command the model runs: it records its pid, then sleeps.
const SLEEPER: &str = r#"{"command":"echo $$ > sleeper.pid && exec sleep 1000"}"#;

/// How long a stop may take, from the signal to the process's end.
const STOP_LIMIT: Duration = Duration::from_secs(5);

/// A model that runs [`SLEEPER`] and would then say "slept".
pub(super) async fn sleeper_model() -> FakeOpenAi {
    FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() == Some("tool") {
            Response::text("slept")
        } else {
            Response::tool_calls(&[("call_sleep", "bash", SLEEPER)])
        }
    })
    .await
    .unwrap()
}

/// The data directory of a sandbox (the platform default under its home).
pub(super) fn data_dir(s: &Sandbox) -> PathBuf {
    s.home.join(".local/share/taskforce")
}

/// The lock files of runtimes under `data`.
pub(super) fn lock_files(data: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data.join("runtimes"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Waits until the bash command has written its pid; answers it.
pub(super) async fn sleeper_pid(project: &Path) -> u32 {
    let file = project.join("sleeper.pid");
    let read = || {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
    };
    taskforce_testkit::eventually("the bash command to start", || read().is_some()).await;
    read().unwrap_or_default()
}

/// Whether process `pid` still runs (a zombie waiting for its parent does not).
pub(super) fn runs(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Sends `signal` (`TERM`, `INT`) to `child` and waits for it to end; fails past [`STOP_LIMIT`].
async fn stop(child: Child, signal: &str) -> (ExitStatus, String) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let sent = Instant::now();
    let out = tokio::time::timeout(
        STOP_LIMIT,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await
    .unwrap_or_else(|_| panic!("still running {STOP_LIMIT:?} after SIG{signal}"))
    .unwrap()
    .unwrap();
    let took = sent.elapsed();
    eprintln!("SIG{signal} to exit: {took:?}");
    assert!(took < STOP_LIMIT);
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks what a clean stop leaves: no lock file, no sleeper, and the run's cancelled end on
/// disk (read straight from the store, which repairs nothing).
async fn assert_stopped_cleanly(s: &Sandbox, sleeper: u32, stderr: &str) {
    let data = data_dir(s);
    assert!(lock_files(&data).is_empty(), "{:?}", lock_files(&data));
    assert!(
        !runs(sleeper),
        "the bash command's process {sleeper} still runs"
    );
    let store = SqliteStore::open(&data).await.unwrap();
    let sessions = store.sessions(&SessionFilter::default()).await.unwrap();
    assert_eq!(sessions.len(), 1, "{stderr}");
    let messages = store.messages(&sessions[0].id).await.unwrap();
    store.close().await;
    let answer = messages
        .iter()
        .find_map(|m| m.info.as_assistant())
        .expect("an answer");
    let error = answer.error.as_ref().expect("the answer was aborted");
    assert_eq!(error.name(), "MessageAbortedError", "{error:?}");
    assert_ne!(
        error.message(),
        Some(taskforce_actors::STOPPED),
        "a clean stop cancels the run; it is not left to a repair"
    );
    assert!(answer.time.completed.is_some(), "{answer:?}");
    let call = messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| p.as_tool())
        .expect("the bash call");
    assert!(
        matches!(call.state, ToolState::Error(_)),
        "{:?}",
        call.state
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_serve_with_a_running_command_and_an_sse_client() {
    let fake = sleeper_model().await;
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let (serve, base) = spawn_serve(&s).await;

    let client = reqwest::Client::new();
    let mut sse = client
        .get(format!("{base}/event"))
        .send()
        .await
        .unwrap()
        .bytes_stream();
    let connected = sse.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&connected).contains("server.connected"));
    let session: serde_json::Value = client
        .post(format!("{base}/session"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = session["id"].as_str().unwrap();
    let queued = client
        .post(format!("{base}/session/{id}/prompt_async"))
        .json(&serde_json::json!({"parts": [{"type": "text", "text": "sleep"}]}))
        .send()
        .await
        .unwrap();
    assert!(queued.status().is_success(), "{}", queued.status());
    let sleeper = sleeper_pid(&s.project).await;
    assert!(runs(sleeper));

    let (status, stderr) = stop(serve, "TERM").await;
    assert!(status.success(), "{status:?}: {stderr}");
    assert_stopped_cleanly(&s, sleeper, &stderr).await;
    // The SSE client's stream ended with the process.
    let rest = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(_)) = sse.next().await {}
    })
    .await;
    assert!(rest.is_ok(), "the SSE stream is still open");
}

/// Runs `taskforce run` on the sleeper model, stops it with `signal` once the command runs,
/// and checks the clean stop and the exit status `code`.
async fn run_stops_on(signal: &str, code: i32) {
    let fake = sleeper_model().await;
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let run = s
        .command(&["run", "sleep"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sleeper = sleeper_pid(&s.project).await;
    assert!(runs(sleeper));
    let (status, stderr) = stop(run, signal).await;
    assert_eq!(status.code(), Some(code), "{stderr}");
    assert!(stderr.contains("cancelling the session tree"), "{stderr}");
    assert_stopped_cleanly(&s, sleeper, &stderr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_run_with_143() {
    run_stops_on("TERM", 143).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_stops_run_with_130() {
    run_stops_on("INT", 130).await;
}
