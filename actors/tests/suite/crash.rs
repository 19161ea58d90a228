//! A runtime that dies mid-run (kill -9) and the runtimes that come after it on the same data
//! directory: the run it left is ended as interrupted, once, and the session goes on.
//!
//! The dying runtime is a real process: this test binary run again on
//! [`a_runtime_that_dies_mid_run`], which starts a runtime, prompts, waits until the run is on
//! disk at the chosen point, says so on its stdout, and waits to be killed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use futures::StreamExt;
use taskforce_actors::STOPPED;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, PartKind, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::until;

use super::runtime::{Env, options_at};

/// The test the dying process runs (with the environment below); a no-op anywhere else.
const CHILD_TEST: &str = "suite::crash::a_runtime_that_dies_mid_run";

/// Where the dying runtime stops: in a tool call, or in the middle of a streamed answer.
const POINT: &str = "TASKFORCE_TEST_CRASH_POINT";
const PROJECT: &str = "TASKFORCE_TEST_CRASH_PROJECT";
const DATA: &str = "TASKFORCE_TEST_CRASH_DATA";
const HOME: &str = "TASKFORCE_TEST_CRASH_HOME";

/// The command the model runs at the tool point: it records its pid, then sleeps.
const SLEEPER: &str = r#"{"command":"echo $$ > sleeper.pid && exec sleep 1000"}"#;

/// A fake model: the first prompt runs [`SLEEPER`] (`"go to the tool"`) or streams an answer
/// that never ends (`"go to the stream"`); a later prompt (`"carry on after the crash"`) gets
/// "fine again".
async fn fake() -> FakeOpenAi {
    FakeOpenAi::start(|req: &RecordedRequest| {
        if req.contains("carry on after the crash") {
            Response::text("fine again")
        } else if req.contains("go to the tool") {
            Response::tool_calls(&[("call_sleep", "bash", SLEEPER)])
        } else {
            Response::text("half an answer that never ends").stall_after(3)
        }
    })
    .await
    .unwrap()
}

/// Run only as the dying process: starts a runtime on the given directories, prompts a new
/// session, waits until the run is stored at the point asked for, prints `READY <session>` and
/// waits to be killed.
#[ignore = "the process a crash test kills; it does nothing when run by itself"]
#[actix_rt::test]
async fn a_runtime_that_dies_mid_run() {
    let (Ok(point), Ok(project), Ok(data), Ok(home)) = (
        std::env::var(POINT),
        std::env::var(PROJECT),
        std::env::var(DATA),
        std::env::var(HOME),
    ) else {
        return;
    };
    let options = options_at(Path::new(&project), Path::new(&data), Path::new(&home));
    let rt = Runtime::start(options).await.unwrap();
    let session = rt.create_session(None, None).await.unwrap();
    rt.prompt_async(&session.id, PromptInput::text(format!("go to the {point}")))
        .await
        .unwrap();
    // Reads wait for the session's queued writes: what they show is on disk.
    let (sid, point_ref) = (&session.id, point.as_str());
    until(
        &rt,
        &format!("the run to get to the {point}"),
        |rt| async move {
            let messages = rt.messages(sid).await.unwrap();
            match point_ref {
                "tool" => tool_states(&messages).contains(&"running"),
                _ => texts(&messages).iter().any(|t| t.starts_with("half")),
            }
        },
    )
    .await;
    println!("READY {}", session.id);
    std::future::pending::<()>().await;
}

/// A runtime in another process, stopped at `point`, with the session it runs.
struct Dying {
    child: Child,
    session: SessionId,
}

impl Dying {
    /// Starts it and waits until it says it got to `point` (read off this thread: the fake
    /// model it calls runs on this one).
    async fn start(env: &Env, point: &'static str) -> Dying {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([CHILD_TEST, "--exact", "--ignored", "--nocapture"])
            .env(POINT, point)
            .env(PROJECT, env.project())
            .env(DATA, env.data())
            .env(HOME, env.home())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let session = tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .find_map(|line| line.strip_prefix("READY ").map(str::to_string))
        })
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("the dying runtime never got to the {point}"));
        Dying {
            child,
            session: SessionId::parse(session.trim()).unwrap(),
        }
    }

    /// Kills it as `kill -9` would.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Dying {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_states(messages: &[MessageWithParts]) -> Vec<&'static str> {
    messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_tool())
        .map(|t| t.state.status())
        .collect()
}

fn texts(messages: &[MessageWithParts]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_text())
        .map(|t| t.text.clone())
        .collect()
}

/// The session's first answer: ended as interrupted, with an error and a completion time.
fn assert_interrupted(messages: &[MessageWithParts]) {
    let answer = messages
        .iter()
        .find_map(|m| m.info.as_assistant())
        .expect("an answer");
    let error = answer.error.as_ref().expect("the answer has an error");
    assert_eq!(error.message(), Some(STOPPED), "{error:?}");
    assert!(answer.time.completed.is_some(), "{answer:?}");
}

/// Kills the sleeper, which a kill -9 of its runtime leaves running in its own process group.
fn kill_sleeper(project: &Path) {
    let pid = std::fs::read_to_string(project.join("sleeper.pid")).unwrap();
    let _ = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .stderr(Stdio::null())
        .status();
}

/// The lock files under the data directory.
fn lock_files(data: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data.join("runtimes"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[actix_rt::test]
async fn a_run_killed_mid_tool_is_ended_as_interrupted_and_the_session_goes_on() {
    let fake = fake().await;
    let env = Env::new(&fake.base_url(), "");
    let dying = Dying::start(&env, "tool").await;
    let session = dying.session.clone();

    // A runtime that starts while the other still runs leaves its run alone.
    let rt = env.runtime().await;
    assert!(rt.repaired_at_start().is_empty());
    assert_eq!(
        tool_states(&rt.messages(&session).await.unwrap()),
        ["running"]
    );
    let mut events = rt.subscribe(Filter::Session(session.clone()));

    dying.kill();
    kill_sleeper(&env.project());

    // The next prompt finds the run left by a runtime that is gone: it is ended first, and
    // the prompt runs as usual.
    let answer = rt
        .prompt(&session, PromptInput::text("carry on after the crash"))
        .await
        .unwrap();
    assert_eq!(texts(std::slice::from_ref(&answer)), ["fine again"]);
    let messages = rt.messages(&session).await.unwrap();
    assert_interrupted(&messages);
    let call = messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| p.as_tool())
        .unwrap();
    let ToolState::Error(failed) = &call.state else {
        panic!("{:?}", call.state)
    };
    assert_eq!(failed.error, STOPPED);

    // `session.error` said why, before the new turn began.
    let mut said = None;
    while let Some(BusItem::Event(e)) = events.next().await {
        match &e.event {
            Event::SessionError { error, .. } if said.is_none() => {
                said = error.as_ref().and_then(|e| e.message().map(str::to_string));
            }
            Event::PartUpdated { part, .. }
                if part.as_text().is_some_and(|t| t.text.contains("fine")) =>
            {
                break;
            }
            _ => {}
        }
    }
    assert_eq!(said.as_deref(), Some(STOPPED));
    // The model read the interrupted call as failed.
    let last = fake.requests().last().unwrap().raw_body.clone();
    assert!(last.contains(STOPPED), "{last}");
}

#[actix_rt::test]
async fn a_runtime_started_after_a_death_mid_stream_repairs_the_run_once() {
    let fake = fake().await;
    let env = Env::new(&fake.base_url(), "");
    let dying = Dying::start(&env, "stream").await;
    let session = dying.session.clone();
    dying.kill();
    assert_eq!(
        lock_files(&env.data()).len(),
        1,
        "the dead runtime's lock file"
    );

    // Three runtimes start at once: one of them repairs the run.
    let runtimes = futures::future::join_all((0..3).map(|_| env.runtime())).await;
    let repairs: Vec<&[SessionId]> = runtimes.iter().map(|r| r.repaired_at_start()).collect();
    assert_eq!(
        repairs.iter().filter(|r| r.contains(&session)).count(),
        1,
        "{repairs:?}"
    );
    // Only the live runtimes' lock files are left.
    assert_eq!(lock_files(&env.data()).len(), 3);

    let rt = &runtimes[0];
    let messages = rt.messages(&session).await.unwrap();
    assert_interrupted(&messages);
    let text = messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match &p.kind {
            PartKind::Text(t) if t.text.starts_with("half") => Some(t.clone()),
            _ => None,
        })
        .unwrap();
    assert!(text.time.unwrap().end.is_some(), "{text:?}");
    assert!(rt.statuses().is_empty());
    let answer = rt
        .prompt(&session, PromptInput::text("carry on after the crash"))
        .await
        .unwrap();
    assert_eq!(texts(std::slice::from_ref(&answer)), ["fine again"]);
    assert!(matches!(&*answer.info, Message::Assistant(a) if a.error.is_none()));
}
