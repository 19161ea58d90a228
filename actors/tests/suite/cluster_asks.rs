//! Two runtimes joined in one cluster over a real NATS (`TASKFORCE_TEST_NATS_URL`), each on its
//! own store: a question or a permission ask raised on one is listed and answered through the
//! other, the asks of a node taken for dead are closed (by the others, and by the node itself
//! when it comes back), and a cancel sent through the other stops a run of the first.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskforce_actors::bus::{BusItem, Event, Filter, Subscription};
use taskforce_actors::question::QuestionRequest;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::permission::PermissionReply;
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::nats::TestNats;
use taskforce_testkit::proxy::CutProxy;
use taskforce_testkit::script::last_content;

use super::runtime::Env;

/// A node of `nats`'s cluster named `node`, with models from `fake` and `extra` config.
async fn node(fake: &FakeOpenAi, nats: &TestNats, node: &str, extra: &str) -> (Env, Runtime) {
    node_with_lease(fake, nats, node, "10s", extra).await
}

/// A node as [`node`] makes, whose lease lasts `lease`.
async fn node_with_lease(
    fake: &FakeOpenAi,
    nats: &TestNats,
    node: &str,
    lease: &str,
    extra: &str,
) -> (Env, Runtime) {
    let env = Env::new(
        &fake.base_url(),
        &format!("{}{extra}", nats.cluster_toml(node, lease)),
    );
    let mut options = env.options();
    options.cluster = true;
    let rt = Runtime::start(options).await.unwrap();
    (env, rt)
}

/// Prompts `session` on `rt` with `text` in a task of its own; its answer comes with the task.
fn prompt_in_background(
    rt: &Runtime,
    session: &SessionId,
    text: &'static str,
) -> tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>> {
    let (rt, session) = (rt.clone(), session.clone());
    tokio::spawn(async move { rt.prompt(&session, PromptInput::text(text)).await })
}

/// The first event of `events` that `pick` takes.
async fn first<T>(events: &mut Subscription, pick: impl Fn(&Event) -> Option<T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(item) = events.next().await {
            if let BusItem::Event(e) = item
                && let Some(found) = pick(&e.event)
            {
                return found;
            }
        }
        panic!("the bus ended");
    })
    .await
    .expect("the event in time")
}

fn asks_then_reports(
    tool: &'static str,
    input: serde_json::Value,
) -> impl Fn(&RecordedRequest) -> Response {
    move |req| {
        if req.last_role() == Some("user") {
            return Response::tool_calls(&[("call_1", tool, &input.to_string())]);
        }
        Response::text(&format!("heard: {}", last_content(req)))
    }
}

/// The first question `events` sees asked.
async fn question_asked(events: &mut Subscription) -> QuestionRequest {
    first(events, |e| match e {
        Event::QuestionAsked(request) => Some((**request).clone()),
        _ => None,
    })
    .await
}

/// A fake model whose first answer asks `question` (Red or Blue) and which then reports what
/// it heard.
async fn asking(question: &str) -> FakeOpenAi {
    let input = json!({"questions": [{
        "question": question, "header": "Color",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]
    }]});
    FakeOpenAi::start(asks_then_reports("question", input))
        .await
        .unwrap()
}

#[actix_rt::test]
async fn a_question_raised_on_one_node_is_answered_from_another() {
    let Some(nats) = TestNats::fresh("cluster_question") else {
        return;
    };
    let fake = asking("Which color?").await;
    let (_a_env, a) = node(&fake, &nats, "node-a", "").await;
    let (_b_env, b) = node(&fake, &nats, "node-b", "").await;
    let mut on_b = b.subscribe(Filter::All);
    let root = a.create_session(None, None).await.unwrap();
    let run = prompt_in_background(&a, &root.id, "ask me");
    let asked = question_asked(&mut on_b).await;
    assert_eq!(
        b.pending_questions().await,
        vec![asked.clone()],
        "node B lists the question node A holds"
    );
    assert!(
        b.reply_question(&asked.id, vec![vec!["Blue".into()]])
            .await
            .unwrap(),
        "node A took the answer given on node B"
    );
    let answer = run.await.unwrap().unwrap();
    let text = format!("{:?}", answer.parts);
    assert!(text.contains("Blue"), "{text}");
    assert!(b.pending_questions().await.is_empty());
    assert!(
        !b.reply_question(&asked.id, vec![vec!["Red".into()]])
            .await
            .unwrap(),
        "answered once only: no node holds it any more"
    );
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn a_permission_ask_raised_on_one_node_is_answered_from_another() {
    let Some(nats) = TestNats::fresh("cluster_permission") else {
        return;
    };
    let command = json!({"command": "echo crossed", "description": "Says crossed"});
    let fake = FakeOpenAi::start(asks_then_reports("bash", command))
        .await
        .unwrap();
    let ask = "\n[permission]\nbash = \"ask\"\n";
    let (_a_env, a) = node(&fake, &nats, "node-a", ask).await;
    let (_b_env, b) = node(&fake, &nats, "node-b", ask).await;
    let mut on_b = b.subscribe(Filter::All);
    let root = a.create_session(None, None).await.unwrap();
    let run = prompt_in_background(&a, &root.id, "run it");
    let asked = first(&mut on_b, |e| match e {
        Event::PermissionAsked(request) => Some((**request).clone()),
        _ => None,
    })
    .await;
    assert_eq!(
        b.pending_permissions().await,
        vec![asked.clone()],
        "node B lists the ask node A holds"
    );
    assert!(
        b.reply_permission(&asked.id, PermissionReply::Once, None)
            .await,
        "node A took the reply given on node B"
    );
    let answer = run.await.unwrap().unwrap();
    let text = format!("{:?}", answer.parts);
    assert!(text.contains("crossed"), "the command ran: {text}");
    assert!(b.pending_permissions().await.is_empty());
    assert!(
        !b.reply_permission(&asked.id, PermissionReply::Once, None)
            .await,
        "no node holds it any more"
    );
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn the_asks_of_a_node_taken_for_dead_are_closed_for_clients_and_leave_the_lists() {
    let Some(nats) = TestNats::fresh("cluster_dead_asks") else {
        return;
    };
    let fake = asking("Which size?").await;
    let (_a_env, a) = node_with_lease(&fake, &nats, "node-a", "1s", "").await;
    let mut on_a = a.subscribe(Filter::All);
    let root = a.create_session(None, None).await.unwrap();
    let _run = prompt_in_background(&a, &root.id, "ask me");
    let asked = question_asked(&mut on_a).await;
    // Node B joins after the question was raised: it learns of it from node A when it joins.
    let (_b_env, b) = node_with_lease(&fake, &nats, "node-b", "1s", "").await;
    let mut on_b = b.subscribe(Filter::All);
    assert_eq!(b.pending_questions().await, vec![asked.clone()]);

    // Node A stops renewing its lease, as a node that hangs or dies does.
    a.cluster().unwrap().stop_heartbeat();
    let closed = first(&mut on_b, |e| match e {
        Event::QuestionRejected {
            session_id,
            request_id,
        } if *request_id == asked.id => Some(session_id.clone()),
        _ => None,
    })
    .await;
    assert_eq!(closed, asked.session_id);
    assert!(
        b.pending_questions().await.is_empty(),
        "a node taken for dead is not listed"
    );
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn a_node_cut_off_longer_than_its_lease_dismisses_its_asks_when_it_is_back() {
    let Some(nats) = TestNats::fresh("cluster_revived_asks") else {
        return;
    };
    let fake = asking("Which road?").await;
    // Node A reaches NATS through a proxy the test cuts; node B directly.
    let proxy = CutProxy::start(&nats.url).await;
    let env = Env::new(
        &fake.base_url(),
        &nats.cluster_toml_via(&proxy.url, "node-a", "1s"),
    );
    let mut options = env.options();
    options.cluster = true;
    let a = Runtime::start(options).await.unwrap();
    let (_b_env, b) = node_with_lease(&fake, &nats, "node-b", "1s", "").await;
    let mut on_b = b.subscribe(Filter::All);
    let mut on_a = a.subscribe(Filter::All);
    let root = a.create_session(None, None).await.unwrap();
    let run = prompt_in_background(&a, &root.id, "ask me");
    let asked = question_asked(&mut on_b).await;

    // Cut off for longer than its lease: node B takes it for dead and closes its question.
    proxy.cut();
    first(&mut on_b, |e| match e {
        Event::QuestionRejected { request_id, .. } if *request_id == asked.id => Some(()),
        _ => None,
    })
    .await;
    assert!(b.pending_questions().await.is_empty());
    proxy.restore();

    // Back, node A learns it was taken for dead and dismisses the question itself: its run
    // ends as after any dismissal instead of waiting for an answer no client can give.
    first(&mut on_a, |e| match e {
        Event::QuestionRejected { request_id, .. } if *request_id == asked.id => Some(()),
        _ => None,
    })
    .await;
    let answer = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run ended")
        .unwrap()
        .unwrap();
    let text = format!("{:?}", answer.parts);
    assert!(text.contains("The user dismissed this question"), "{text}");
    assert!(a.pending_questions().await.is_empty());
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}

#[actix_rt::test]
async fn a_cancel_sent_through_one_node_stops_a_run_on_another() {
    let Some(nats) = TestNats::fresh("cluster_cancel") else {
        return;
    };
    let fake = FakeOpenAi::start(|_req| Response::text("never finished").stall_after(1))
        .await
        .unwrap();
    let (_a_env, a) = node(&fake, &nats, "node-a", "").await;
    let (_b_env, b) = node(&fake, &nats, "node-b", "").await;
    let mut on_b = b.subscribe(Filter::All);
    let root = a.create_session(None, None).await.unwrap();
    let run = prompt_in_background(&a, &root.id, "go on forever");
    // Running on A (B sees it busy) before B is asked to cancel it.
    first(&mut on_b, |e| match e {
        Event::PartUpdated { part } if part.session_id == root.id => Some(()),
        _ => None,
    })
    .await;
    b.cancel(&root.id).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run on A stopped")
        .unwrap();
    let error = match ended {
        Ok(message) => format!("{:?}", message.info),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("Aborted") || error.contains("cancelled"),
        "{error}"
    );
    first(&mut on_b, |e| match e {
        Event::SessionIdle { session_id } if *session_id == root.id => Some(()),
        _ => None,
    })
    .await;
    a.stop(Duration::from_secs(5)).await;
    b.stop(Duration::from_secs(5)).await;
}
