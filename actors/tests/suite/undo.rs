//! Undo and redo of turns: a revert puts back the files a turn and its subagents changed
//! (writes and shell commands alike) and hides its messages; an unrevert brings them back; the
//! next prompt drops what stayed reverted.

use std::fs;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::FileDiffStatus;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{is_child, last_user_text};

use super::runtime::Env;

/// Shell commands and edits run without asking.
const PERMISSIONS: &str = "\n[permission]\nbash = \"allow\"\nedit = \"allow\"\n";

/// A parent that, asked to "change", writes `a.txt`, removes `notes.txt` and makes `made.txt`
/// with the shell, and has a `general` child write `child.txt`; anything else gets a text.
fn model(req: &RecordedRequest) -> Response {
    {
        if req.last_role() != Some("user") {
            return Response::text("done");
        }
        if is_child(req) {
            let args = json!({"filePath": "child.txt", "content": "from the child\n"});
            return Response::tool_calls(&[("call_w", "write", &args.to_string())]);
        }
        if !last_user_text(req).contains("change") {
            return Response::text("hello again");
        }
        let write = json!({"filePath": "a.txt", "content": "new a\n"});
        let bash = json!({"command": "rm notes.txt && echo made > made.txt", "description": "shuffle files"});
        let task = json!({"description": "write a file", "prompt": "write child.txt", "subagent_type": "general"});
        Response::tool_calls(&[
            ("call_write", "write", &write.to_string()),
            ("call_bash", "bash", &bash.to_string()),
            ("call_task", "task", &task.to_string()),
        ])
    }
}

async fn prompt(rt: &Runtime, id: &SessionId, text: &str) {
    tokio::time::timeout(
        Duration::from_secs(30),
        rt.prompt(id, PromptInput::text(text)),
    )
    .await
    .expect("the turn ends")
    .unwrap();
}

fn read(env: &Env, rel: &str) -> Option<String> {
    fs::read_to_string(env.project().join(rel)).ok()
}

#[actix_rt::test]
async fn a_revert_puts_back_what_a_turn_and_its_subagents_changed_and_an_unrevert_redoes_it() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = Env::new(&fake.base_url(), PERMISSIONS);
    env.file("a.txt", "old a\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    prompt(&rt, &s.id, "change the files").await;

    assert_eq!(read(&env, "a.txt").as_deref(), Some("new a\n"));
    assert_eq!(read(&env, "notes.txt"), None);
    assert_eq!(read(&env, "made.txt").as_deref(), Some("made\n"));
    assert_eq!(read(&env, "child.txt").as_deref(), Some("from the child\n"));

    let diff = rt.diff(&s.id, None).await.unwrap();
    let files: Vec<(&str, Option<FileDiffStatus>)> =
        diff.iter().map(|d| (d.file.as_str(), d.status)).collect();
    assert_eq!(
        files,
        vec![
            ("a.txt", Some(FileDiffStatus::Modified)),
            ("child.txt", Some(FileDiffStatus::Added)),
            ("made.txt", Some(FileDiffStatus::Added)),
            ("notes.txt", Some(FileDiffStatus::Deleted)),
        ],
        "the session's diff names what its turn and its child changed"
    );
    let a = &diff[0];
    assert_eq!(
        (a.before.as_str(), a.after.as_str()),
        ("old a\n", "new a\n")
    );
    // The turn's end published the same list.
    let published = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(item) = events.next().await {
            if let BusItem::Event(e) = item
                && let Event::SessionDiff { session_id, diff } = &e.event
                && *session_id == s.id
            {
                return diff.clone();
            }
        }
        panic!("the bus ended");
    })
    .await
    .expect("a session.diff after the turn");
    assert_eq!(published, diff);

    let messages = rt.messages(&s.id).await.unwrap();
    let first = messages[0].info.id().clone();
    let reverted = rt.revert(&s.id, &first, None).await.unwrap();
    assert_eq!(
        reverted.revert.as_ref().map(|r| &r.message_id),
        Some(&first)
    );
    assert_eq!(read(&env, "a.txt").as_deref(), Some("old a\n"));
    assert_eq!(
        read(&env, "notes.txt").as_deref(),
        Some("hello from the project\n")
    );
    assert_eq!(
        read(&env, "made.txt"),
        None,
        "a file the shell made is gone"
    );
    assert_eq!(
        read(&env, "child.txt"),
        None,
        "a file the child made is gone"
    );
    assert_eq!(rt.session(&s.id).await.unwrap().revert, reverted.revert);

    let redone = rt.unrevert(&s.id).await.unwrap();
    assert!(redone.revert.is_none());
    assert_eq!(read(&env, "a.txt").as_deref(), Some("new a\n"));
    assert_eq!(read(&env, "notes.txt"), None);
    assert_eq!(read(&env, "made.txt").as_deref(), Some("made\n"));
    assert_eq!(read(&env, "child.txt").as_deref(), Some("from the child\n"));
    assert_eq!(rt.messages(&s.id).await.unwrap().len(), messages.len());
}

#[actix_rt::test]
async fn the_prompt_after_a_revert_drops_the_reverted_messages_for_good() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = Env::new(&fake.base_url(), PERMISSIONS);
    env.file("a.txt", "old a\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    prompt(&rt, &s.id, "say hi").await;
    prompt(&rt, &s.id, "change the files").await;
    let before = rt.messages(&s.id).await.unwrap();
    let users: Vec<usize> = (0..before.len())
        .filter(|&i| before[i].info.as_user().is_some())
        .collect();
    assert_eq!(users.len(), 2);
    let at = users[1];
    let second = before[at].info.id().clone();
    rt.revert(&s.id, &second, None).await.unwrap();
    assert_eq!(read(&env, "a.txt").as_deref(), Some("old a\n"));

    let mut events = rt.subscribe(Filter::All);
    prompt(&rt, &s.id, "say hi once more").await;
    let after = rt.messages(&s.id).await.unwrap();
    assert_eq!(
        after.len(),
        at + 2,
        "the first turn kept, the new one added"
    );
    for (kept, was) in after.iter().zip(&before[..at]) {
        assert_eq!(kept.info.id(), was.info.id());
    }
    assert!(after.iter().all(|m| m.info.id() != &second));
    assert!(rt.session(&s.id).await.unwrap().revert.is_none());
    assert_eq!(
        read(&env, "a.txt").as_deref(),
        Some("old a\n"),
        "files stay reverted"
    );

    let mut removed = Vec::new();
    while removed.len() < before.len() - at {
        let item = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .expect("the removals are published");
        if let Some(BusItem::Event(e)) = item
            && let Event::MessageRemoved { message_id, .. } = &e.event
        {
            removed.push(message_id.clone());
        }
    }
    let gone: Vec<_> = before[at..].iter().map(|m| m.info.id().clone()).collect();
    assert_eq!(removed, gone);

    // Nothing left to redo.
    assert!(rt.unrevert(&s.id).await.unwrap().revert.is_none());
    let missing = taskforce_agents::id::MessageId::new();
    assert!(matches!(
        rt.revert(&s.id, &missing, None).await,
        Err(RuntimeError::MessageNotFound(_))
    ));
}
