//! Compaction end to end: a step that overflows the context is followed by a summary from the
//! hidden compaction agent; the model then sees the history from there.

use taskforce_actors::PromptInput;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_agents::model::{Message, PartKind};
use taskforce_testkit::fake_openai::{Chunk, FakeOpenAi, RecordedRequest, Response};

use super::runtime::Env;

const SUMMARY: &str = "## Goal\nRead the notes (SUMMARY-OF-WORK)";

fn env(fake: &FakeOpenAi, extra: &str) -> Env {
    Env::with_config(&format!(
        "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n{extra}\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-test\"\n\n[provider.fake.models.\"gpt-test\"]\ncontext = 1000\noutput = 100\n",
        fake.base_url()
    ))
}

fn is_summary_request(req: &RecordedRequest) -> bool {
    req.contains("You summarize a conversation")
}

/// A read of notes.txt reporting `input` prompt tokens.
fn read_call(input: u64) -> Response {
    Response::Stream(vec![
        Chunk::role(),
        Chunk::tool_call_start(0, "call_read", "read"),
        Chunk::tool_call_args(0, r#"{"filePath":"notes.txt"}"#),
        Chunk::finish("tool_calls"),
        Chunk::usage(input, 5),
        Chunk::done(),
    ])
}

fn model(req: &RecordedRequest) -> Response {
    if is_summary_request(req) {
        Response::text(SUMMARY)
    } else if req.contains("Continue if you have next steps") {
        Response::text("all done")
    } else if req.last_role() == Some("user") {
        read_call(950) // 950 + 5 ≥ 1000 − 100: overflow
    } else {
        Response::text("read it")
    }
}

#[actix_rt::test]
async fn an_overflowing_step_is_summarized_and_the_model_continues_from_the_summary() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = env(&fake, "");
    let rt = env.runtime().await;
    let session = rt.create_session(None, Some("long".into())).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(session.id.clone()));
    let answer = rt
        .prompt(&session.id, PromptInput::text("please read the notes"))
        .await
        .unwrap();
    assert_eq!(
        answer
            .parts
            .iter()
            .filter_map(|p| p.as_text())
            .map(|t| t.text.as_str())
            .collect::<String>(),
        "all done"
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "read, summary, continue");
    let summary_request = &requests[1];
    assert!(is_summary_request(summary_request));
    assert!(
        summary_request.tool_names().is_empty(),
        "the summary has no tools"
    );
    assert!(summary_request.contains("What did we do so far?"));
    assert!(summary_request.contains("please read the notes"));
    assert!(
        summary_request.contains("hello from the project"),
        "the tool result is summarized"
    );
    let after = &requests[2];
    assert!(
        !after.contains("please read the notes"),
        "older history is left out"
    );
    assert!(after.contains("SUMMARY-OF-WORK"));
    assert!(after.contains("What did we do so far?"));

    let messages = rt.messages(&session.id).await.unwrap();
    let shape: Vec<String> = messages
        .iter()
        .map(|m| match &*m.info {
            Message::User(u) => format!(
                "user:{}:{}",
                u.agent,
                m.parts
                    .iter()
                    .map(|p| p.type_name())
                    .collect::<Vec<_>>()
                    .join("+")
            ),
            Message::Assistant(a) => format!(
                "assistant:{}:{}",
                a.agent,
                if a.summary == Some(true) {
                    "summary"
                } else {
                    "answer"
                }
            ),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "user:build:text",
            "assistant:build:answer",
            "user:build:compaction",
            "assistant:compaction:summary",
            "user:build:text",
            "assistant:build:answer",
        ]
    );
    let cont = &messages[4].parts[0];
    assert!(
        matches!(&cont.kind, PartKind::Text(t) if t.synthetic == Some(true) && t.text.starts_with("Continue if you have next steps"))
    );

    let mut compacted = false;
    while let Ok(Some(BusItem::Event(e))) = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        futures::StreamExt::next(&mut events),
    )
    .await
    {
        compacted |= matches!(e.event, Event::SessionCompacted { .. });
    }
    assert!(compacted, "session.compacted was published");
}

#[actix_rt::test]
async fn summarize_on_request_ends_the_turn_with_the_summary() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if is_summary_request(req) {
            Response::text(SUMMARY)
        } else {
            Response::text("plain answer")
        }
    })
    .await
    .unwrap();
    let env = env(&fake, "");
    let rt = env.runtime().await;
    let session = rt
        .create_session(None, Some("manual".into()))
        .await
        .unwrap();
    rt.prompt(&session.id, PromptInput::text("first question"))
        .await
        .unwrap();
    let summary = rt.summarize(&session.id, None).await.unwrap();
    let info = summary.info.as_assistant().unwrap();
    assert_eq!(info.summary, Some(true));
    assert_eq!(info.agent, "compaction");
    assert_eq!(
        fake.requests().len(),
        2,
        "no continue message after a requested summary"
    );
    rt.prompt(&session.id, PromptInput::text("second question"))
        .await
        .unwrap();
    let last = fake.requests().pop().unwrap();
    assert!(last.contains("second question"));
    assert!(last.contains("SUMMARY-OF-WORK"));
    assert!(
        !last.contains("first question"),
        "the model reads from the summary on"
    );
}

#[actix_rt::test]
async fn no_compaction_when_auto_is_off() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = env(&fake, "[compaction]\nauto = false\n");
    let rt = env.runtime().await;
    let session = rt.create_session(None, Some("off".into())).await.unwrap();
    rt.prompt(&session.id, PromptInput::text("please read the notes"))
        .await
        .unwrap();
    assert!(!fake.requests().iter().any(is_summary_request));
    assert_eq!(fake.requests().len(), 2);
}
