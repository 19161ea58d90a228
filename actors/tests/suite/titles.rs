//! Session titles and times: the hidden title agent names a root session on the small model
//! after its first real message; children and named sessions keep their titles; a session's
//! update time moves with its messages.

use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::PromptInput;
use taskforce_actors::bus::{BusItem, Event, Filter};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{is_child, task_call};

use super::runtime::Env;

/// A runtime's environment on `fake`, with a small model for titles.
pub(crate) fn env(fake: &FakeOpenAi) -> Env {
    Env::with_config(&format!(
        "model = \"fake/gpt-test\"\nsmall_model = \"fake/small-model\"\n\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-test\"\n",
        fake.base_url()
    ))
}

fn is_title(req: &RecordedRequest) -> bool {
    req.body["model"] == "small-model"
}

fn model(req: &RecordedRequest) -> Response {
    if is_title(req) {
        Response::text("<think>the user wants a fix</think>\n\n  Login bug fix  \nsecond line")
    } else if !is_child(req) && req.last_role() == Some("user") && req.contains("delegate") {
        task_call(r#"{"description":"Look around","prompt":"look","subagent_type":"explore"}"#)
    } else {
        Response::text("done")
    }
}

async fn title_update(sub: &mut taskforce_actors::bus::Subscription) -> String {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(item) = sub.next().await {
            if let BusItem::Event(e) = item
                && let Event::SessionUpdated { info } = &e.event
                && !info.title.starts_with("New session")
            {
                return info.title.clone();
            }
        }
        panic!("the bus ended");
    })
    .await
    .expect("a titled session.updated")
}

#[actix_rt::test]
async fn a_root_session_is_named_by_the_title_agent_on_the_small_model() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = env(&fake);
    let rt = env.runtime().await;
    let session = rt.create_session(None, None).await.unwrap();
    assert!(session.title.starts_with("New session - "));
    let mut sub = rt.subscribe(Filter::Session(session.id.clone()));
    rt.prompt(&session.id, PromptInput::text("Fix the login bug please"))
        .await
        .unwrap();
    assert_eq!(title_update(&mut sub).await, "Login bug fix");
    let stored = rt.session(&session.id).await.unwrap();
    assert_eq!(stored.title, "Login bug fix");
    // The messages moved time.updated; naming the session did not move it back.
    assert!(stored.time.updated >= session.time.updated);

    let titles: Vec<RecordedRequest> = fake.requests().into_iter().filter(is_title).collect();
    assert_eq!(titles.len(), 1);
    assert!(
        titles[0].contains("Generate a title for this conversation:\\nFix the login bug please")
    );
    assert!(titles[0].contains("You write titles for conversations"));
    assert!(titles[0].tool_names().is_empty());

    // A second message does not rename it.
    rt.prompt(&session.id, PromptInput::text("and the logout one"))
        .await
        .unwrap();
    // Whether a second message asks for a title is decided before its model call (a unit test
    // of the decision covers it); here no title request came with it.
    assert_eq!(fake.requests().into_iter().filter(is_title).count(), 1);
}

#[actix_rt::test]
async fn named_sessions_and_children_keep_their_titles() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = env(&fake);
    let rt = env.runtime().await;
    let named = rt
        .create_session(None, Some("My own title".into()))
        .await
        .unwrap();
    rt.prompt(&named.id, PromptInput::text("please delegate this"))
        .await
        .unwrap();
    assert_eq!(rt.session(&named.id).await.unwrap().title, "My own title");
    let children = rt.children(&named.id).await.unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].title, "Look around (@explore subagent)");
    assert_eq!(
        fake.requests().into_iter().filter(is_title).count(),
        0,
        "neither the named root nor its child asked for a title"
    );
}

#[actix_rt::test]
async fn a_sessions_update_time_moves_with_its_messages_and_is_published() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = env(&fake);
    let rt = env.runtime().await;
    let session = rt.create_session(None, None).await.unwrap();
    let mut sub = rt.subscribe(Filter::Session(session.id.clone()));
    rt.prompt(&session.id, PromptInput::text("Fix the login bug please"))
        .await
        .unwrap();
    // The published times grow, and the last one is the stored one (the title kept).
    let mut last = session.time.updated;
    let stored = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(item) = sub.next().await {
            if let BusItem::Event(e) = item
                && let Event::SessionUpdated { info } = &e.event
            {
                assert!(info.time.updated >= last, "time.updated never goes back");
                last = info.time.updated;
                let stored = rt.session(&session.id).await.unwrap();
                if last > session.time.updated && stored.time.updated == last {
                    return stored;
                }
            }
        }
        panic!("the bus ended");
    })
    .await
    .expect("a session.updated with a later time");
    assert!(stored.time.updated >= stored.time.created);
    let listed = rt.session(&session.id).await.unwrap();
    assert_eq!(listed.time.updated, stored.time.updated);
}
