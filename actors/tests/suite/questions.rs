//! The question tool: a subagent two levels down asks the user; the question reaches the root's
//! watchers with where it comes from; an answer lets the run go on, a dismissal stops it.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskforce_actors::bus::{BusItem, Event, Filter, Subscription};
use taskforce_actors::question::QuestionRequest;
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::model::{PartKind, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::{first_user, last_content, task_call};

use super::runtime::Env;

/// Children may nest twice and the general agent may ask questions.
const CONFIG: &str =
    "\n[subagent]\nmax_depth = 2\n\n[agent.general.permission]\nquestion = \"allow\"\n";

/// The root delegates to a child, which delegates to a grandchild, which asks which color;
/// each then reports what it heard.
fn model(req: &RecordedRequest) -> Response {
    let who = first_user(req);
    let fresh = req.last_role() == Some("user");
    if who.contains("level two") {
        if fresh {
            let questions = json!({"questions": [{
                "question": "Which color?", "header": "Color",
                "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]
            }]});
            return Response::tool_calls(&[("call_q", "question", &questions.to_string())]);
        }
        return Response::text(&format!("two heard: {}", last_content(req)));
    }
    if who.contains("level one") {
        if fresh {
            return task_call(
                r#"{"description":"go deeper","prompt":"level two","subagent_type":"general"}"#,
            );
        }
        return Response::text("one done");
    }
    if fresh {
        return task_call(r#"{"description":"go","prompt":"level one","subagent_type":"general"}"#);
    }
    Response::text("root done")
}

async fn asked(events: &mut Subscription) -> QuestionRequest {
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(item) = events.next().await {
            if let BusItem::Event(e) = item
                && let Event::QuestionAsked(request) = &e.event
            {
                return (**request).clone();
            }
        }
        panic!("the bus ended");
    })
    .await
    .expect("a question.asked")
}

/// The grandchild's question tool part, as it ended.
async fn question_state(rt: &Runtime, asked: &QuestionRequest) -> ToolState {
    rt.messages(&asked.session_id)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.parts.clone())
        .find_map(|p| match &p.kind {
            PartKind::Tool(t) if t.tool == "question" => Some(t.state.clone()),
            _ => None,
        })
        .expect("a question part")
}

#[actix_rt::test]
async fn a_question_two_levels_down_reaches_the_root_and_its_answer_goes_back() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = Env::new(&fake.base_url(), CONFIG);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
    let running = {
        let (rt, id) = (rt.clone(), root.id.clone());
        tokio::spawn(async move { rt.prompt(&id, PromptInput::text("ask deep")).await })
    };
    let request = asked(&mut events).await;
    assert_eq!(request.root_session_id, root.id);
    assert_eq!(request.path, ["build", "general", "general"]);
    assert_eq!(request.questions[0].question, "Which color?");
    assert!(request.tool.is_some());
    assert_eq!(rt.pending_questions().await, vec![request.clone()]);

    assert_eq!(
        rt.reply_question(&request.id, vec![vec!["Blue".into()]])
            .await,
        Ok(true)
    );
    let answer = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the run goes on")
        .unwrap()
        .unwrap();
    assert_eq!(
        answer
            .parts
            .iter()
            .find_map(|p| p.as_text())
            .map(|t| t.text.as_str()),
        Some("root done")
    );
    assert!(rt.pending_questions().await.is_empty());
    let ToolState::Completed(done) = question_state(&rt, &request).await else {
        panic!("the question part completed");
    };
    assert_eq!(
        done.output,
        "User has answered your questions: \"Which color?\"=\"Blue\". You can now continue with the user's answers in mind."
    );
    assert_eq!(done.title, "Asked 1 question");
    let heard = fake
        .requests()
        .iter()
        .any(|r| first_user(r).contains("level two") && last_content(r).contains("\"Blue\""));
    assert!(heard, "the grandchild's model read the answer");
}

#[actix_rt::test]
async fn a_dismissed_question_fails_its_call_and_stops_the_asking_run() {
    let fake = FakeOpenAi::start(model).await.unwrap();
    let env = Env::new(&fake.base_url(), CONFIG);
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
    let running = {
        let (rt, id) = (rt.clone(), root.id.clone());
        tokio::spawn(async move { rt.prompt(&id, PromptInput::text("ask deep")).await })
    };
    let request = asked(&mut events).await;
    assert!(rt.reject_question(&request.id).await);
    assert!(
        !rt.reject_question(&request.id).await,
        "dismissed once only"
    );
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the tree ends")
        .unwrap()
        .unwrap();
    let ToolState::Error(failed) = question_state(&rt, &request).await else {
        panic!("the question part failed");
    };
    assert_eq!(failed.error, "The user dismissed this question");
    let asked_after = fake
        .requests()
        .iter()
        .filter(|r| first_user(r).contains("level two"))
        .count();
    assert_eq!(
        asked_after, 1,
        "the grandchild's run stopped at the dismissal"
    );
}

#[actix_rt::test]
async fn agents_without_the_question_permission_are_not_offered_the_tool() {
    let fake = FakeOpenAi::start(|req: &RecordedRequest| {
        if req.last_role() != Some("user") || first_user(req).contains("look") {
            return Response::text("looked");
        }
        task_call(r#"{"description":"look","prompt":"look","subagent_type":"general"}"#)
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        rt.prompt(&root.id, PromptInput::text("delegate")),
    )
    .await
    .expect("the delegation ends")
    .unwrap();
    let requests = fake.requests();
    let root_tools = requests[0].tool_names();
    assert!(
        root_tools.contains(&"question"),
        "build may ask: {root_tools:?}"
    );
    let child = requests
        .iter()
        .find(|r| first_user(r).contains("look"))
        .expect("the child ran");
    assert!(
        !child.tool_names().contains(&"question"),
        "general is denied questions by default: {:?}",
        child.tool_names()
    );
}
