//! `taskforce run` killed with SIGKILL mid-stream: the next command on the data directory
//! finds the run ended as interrupted, and the session takes a new prompt.

use std::process::Stdio;

use taskforce_actors::STOPPED;
use taskforce_actors::store::{SessionFilter, SqliteStore, Store};
use taskforce_agents::id::SessionId;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

use super::run_cli::configure;
use super::stop_cli::{data_dir, lock_files};
use super::support::Sandbox;

/// Waits until a session's streamed text starting with "half" is on disk; answers the session.
async fn half_an_answer_stored(data: &std::path::Path) -> SessionId {
    let found = std::sync::Mutex::new(None);
    let found_ref = &found;
    taskforce_testkit::eventually_async("the streamed text on disk", || async move {
        if !data.join("taskforce.db").is_file() {
            return false;
        }
        let store = SqliteStore::open(data).await.unwrap();
        for session in store.sessions(&SessionFilter::default()).await.unwrap() {
            let messages = store.messages(&session.id).await.unwrap();
            let half = messages
                .iter()
                .flat_map(|m| m.parts.iter())
                .filter_map(|p| p.as_text())
                .any(|t| t.text.starts_with("half"));
            if half {
                *found_ref.lock().unwrap() = Some(session.id);
            }
        }
        store.close().await;
        found_ref.lock().unwrap().is_some()
    })
    .await;
    found.into_inner().unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_stream_shows_as_interrupted_and_its_session_goes_on() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.contains("carry on after the crash") {
            Response::text("fine again")
        } else {
            Response::text("half an answer that never ends").stall_after(3)
        }
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let data = data_dir(&s);
    let mut run = s
        .command(&["run", "start", "talking"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let session = half_an_answer_stored(&data).await;
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(lock_files(&data).len(), 1, "the dead run's lock file");

    // Blocking calls leave the test's threads to the fake model.
    let shown =
        tokio::task::block_in_place(|| s.ok(&["sessions", "show", session.as_str(), "--json"]))
            .json();
    let answer = &shown["messages"][1];
    assert_eq!(answer["info"]["role"], "assistant", "{shown}");
    assert_eq!(
        answer["info"]["error"]["name"], "MessageAbortedError",
        "{shown}"
    );
    assert_eq!(
        answer["info"]["error"]["data"]["message"], STOPPED,
        "{shown}"
    );
    assert!(answer["info"]["time"]["completed"].is_u64(), "{shown}");
    let text = answer["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "text")
        .unwrap();
    assert!(text["text"].as_str().unwrap().starts_with("half"), "{text}");
    assert!(text["time"]["end"].is_u64(), "{text}");
    assert!(lock_files(&data).is_empty(), "{:?}", lock_files(&data));

    let again = tokio::task::block_in_place(|| {
        s.ok(&[
            "run",
            "--session",
            session.as_str(),
            "carry on after the crash",
        ])
    });
    assert_eq!(again.stdout.trim(), "fine again", "{}", again.stderr);
}
