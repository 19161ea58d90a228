//! Health, agents, commands, config, and the `/session` routes.

use std::time::Duration;

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::Response;

use super::{Sse, answers, array, harness, id_of, stalls, text_of};

fn ids(sessions: &[Value]) -> Vec<String> {
    sessions.iter().map(id_of).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn health_agents_commands_and_redacted_config() {
    let h = harness()
        .config("default_agent = \"plan\"\n")
        .file(
            ".taskforce/command/greet.md",
            "---\ndescription: Greets someone\n---\nSay hello to $1 from $ARGUMENTS",
        )
        .start(answers("unused"))
        .await;

    let health = h.get("/global/health").await.ok();
    assert_eq!(
        health,
        json!({"healthy": true, "version": env!("CARGO_PKG_VERSION")})
    );

    let agents = array(h.get("/agent").await.ok());
    let names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(
        names[0], "plan",
        "the configured default comes first: {names:?}"
    );
    for name in ["build", "general", "explore"] {
        assert_eq!(
            names.iter().filter(|n| **n == name).count(),
            1,
            "{name} is listed once: {names:?}"
        );
    }
    assert_eq!(names.iter().filter(|n| **n == "plan").count(), 1);

    let commands = array(h.get("/command").await.ok());
    let review = commands
        .iter()
        .find(|c| c["name"] == "review")
        .expect("the built-in review command is listed");
    assert_eq!(review["hints"], json!(["$ARGUMENTS"]));
    assert!(
        review["template"]
            .as_str()
            .unwrap()
            .contains("reviewing code changes")
    );
    let greet = commands
        .iter()
        .find(|c| c["name"] == "greet")
        .expect("the project's markdown command is listed");
    assert_eq!(greet["description"], "Greets someone");
    assert_eq!(greet["hints"], json!(["$1", "$ARGUMENTS"]));

    let config = h.get("/config").await;
    let raw = config.body.to_string();
    let config = config.ok();
    assert_eq!(config["provider"]["fake"]["api_key"], "[redacted]");
    assert_eq!(
        config["provider"]["fake"]["base_url"],
        h.fake.base_url().as_str()
    );
    assert_eq!(config["model"], "fake/gpt-test");
    assert_eq!(config["default_agent"], "plan");
    assert!(!raw.contains("sk-test-secret"), "the key leaked: {raw}");
    assert!(h.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_created_and_listed_with_filters() {
    let h = harness().start(answers("unused")).await;
    // No body at all.
    let first = h
        .send(h.request(reqwest::Method::POST, "/session"))
        .await
        .ok();
    assert!(id_of(&first).starts_with("ses_"), "{first}");
    assert!(
        first["title"]
            .as_str()
            .unwrap()
            .starts_with("New session - "),
        "{first}"
    );
    assert!(first.get("parentID").is_none());
    assert_eq!(first["time"]["created"], first["time"]["updated"]);
    taskforce_testkit::next_millisecond().await;

    let alpha = h.session(json!({"title": "Alpha Plan"})).await;
    assert_eq!(alpha["title"], "Alpha Plan");
    taskforce_testkit::next_millisecond().await;
    let child = h
        .session(json!({"parentID": id_of(&alpha), "title": "alpha child"}))
        .await;
    assert_eq!(child["parentID"], alpha["id"]);
    assert_eq!(child["title"], "alpha child");
    taskforce_testkit::next_millisecond().await;
    let untitled_child = h.session(json!({"parentID": id_of(&alpha)})).await;
    assert!(
        untitled_child["title"]
            .as_str()
            .unwrap()
            .starts_with("Child session - "),
        "{untitled_child}"
    );
    taskforce_testkit::next_millisecond().await;
    let rules = json!([
        {"permission": "bash", "pattern": "*", "action": "deny"},
        {"permission": "edit", "pattern": "src/*", "action": "ask"}
    ]);
    let guarded = h
        .session(json!({"title": "Guarded", "permission": rules}))
        .await;
    assert_eq!(guarded["permission"], rules);
    let read_back = h.get(&format!("/session/{}", id_of(&guarded))).await.ok();
    assert_eq!(read_back, guarded, "the rules are stored");

    // Most recently updated first.
    let all = array(h.get("/session").await.ok());
    assert_eq!(
        ids(&all),
        ids(&[
            guarded.clone(),
            untitled_child.clone(),
            child.clone(),
            alpha.clone(),
            first.clone()
        ])
    );

    let roots = array(h.get("/session?roots=true").await.ok());
    assert_eq!(
        ids(&roots),
        ids(&[guarded.clone(), alpha.clone(), first.clone()])
    );

    let found = array(h.get("/session?search=ALPHA").await.ok());
    assert_eq!(ids(&found), ids(&[child.clone(), alpha.clone()]));
    let found_roots = array(h.get("/session?search=alpha&roots=true").await.ok());
    assert_eq!(ids(&found_roots), ids(std::slice::from_ref(&alpha)));
    assert!(array(h.get("/session?search=zebra").await.ok()).is_empty());

    let since = child["time"]["updated"].as_u64().unwrap();
    let recent = array(h.get(&format!("/session?start={since}")).await.ok());
    assert_eq!(
        ids(&recent),
        ids(&[guarded.clone(), untitled_child.clone(), child.clone()])
    );

    let limited = array(h.get("/session?limit=2").await.ok());
    assert_eq!(ids(&limited), ids(&all[..2]));
    let combined = array(h.get("/session?roots=true&limit=1").await.ok());
    assert_eq!(ids(&combined), ids(&[guarded]));

    // Case folding is not ASCII-only; the query is URL-decoded.
    let umlaut = h.session(json!({"title": "Über Sicht"})).await;
    let found = array(h.get("/session?search=%C3%BCBER%20s").await.ok());
    assert_eq!(ids(&found), ids(&[umlaut]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_read_patched_and_deleted_with_its_subtree() {
    let h = harness().start(answers("unused")).await;
    let parent = h.session(json!({"title": "Parent"})).await;
    let p = id_of(&parent);
    let child = h.session(json!({"parentID": p, "title": "Child"})).await;
    let c = id_of(&child);
    let grandchild = h
        .session(json!({"parentID": c, "title": "Grandchild"}))
        .await;
    let g = id_of(&grandchild);
    let bystander = h.session(json!({"title": "Bystander"})).await;

    assert_eq!(h.get(&format!("/session/{p}")).await.ok(), parent);
    assert_eq!(
        ids(&array(h.get(&format!("/session/{p}/children")).await.ok())),
        [c.as_str()]
    );
    assert_eq!(
        ids(&array(h.get(&format!("/session/{c}/children")).await.ok())),
        [g.as_str()]
    );
    assert!(array(h.get(&format!("/session/{g}/children")).await.ok()).is_empty());

    taskforce_testkit::next_millisecond().await;
    let renamed = h
        .patch(&format!("/session/{p}"), json!({"title": "Renamed"}))
        .await
        .ok();
    assert_eq!(renamed["title"], "Renamed");
    assert_eq!(renamed["id"], parent["id"]);
    assert_eq!(
        renamed["time"]["updated"], parent["time"]["updated"],
        "a patch does not bump time.updated"
    );
    let archived = h
        .patch(
            &format!("/session/{p}"),
            json!({"time": {"archived": 1_700_000_000_000u64}}),
        )
        .await
        .ok();
    assert_eq!(archived["time"]["archived"], 1_700_000_000_000u64);
    assert_eq!(archived["title"], "Renamed", "an absent title stays");
    assert_eq!(archived["time"]["updated"], parent["time"]["updated"]);
    assert_eq!(h.get(&format!("/session/{p}")).await.ok(), archived);

    assert_eq!(h.delete(&format!("/session/{p}")).await.ok(), json!(true));
    for gone in [&p, &c, &g] {
        let message = h
            .get(&format!("/session/{gone}"))
            .await
            .error(404, "NotFoundError");
        assert!(message.contains(gone.as_str()), "{message}");
    }
    assert_eq!(
        ids(&array(h.get("/session").await.ok())),
        [id_of(&bystander)],
        "only the bystander is left"
    );
    h.delete(&format!("/session/{p}"))
        .await
        .error(404, "NotFoundError");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_a_busy_session_while_its_prompt_stalls() {
    let h = harness().start(|_| stalls()).await;
    let s = h.session_id().await;
    assert_eq!(h.get("/session/status").await.ok(), json!({}));

    let queued = h
        .post(
            &format!("/session/{s}/prompt_async"),
            json!({"parts": [{"type": "text", "text": "go"}]}),
        )
        .await;
    assert_eq!(queued.status, 204);
    assert_eq!(queued.body, Value::Null);
    h.wait_for_requests(1).await;
    let busy = h.poll("/session/status", |b| b.get(&s).is_some()).await;
    assert_eq!(busy.as_object().unwrap().len(), 1, "{busy}");
    assert_eq!(busy[&s], json!({"type": "busy"}));

    assert_eq!(
        h.post(&format!("/session/{s}/abort"), json!({})).await.ok(),
        json!(true)
    );
    h.poll("/session/status", |b| b == &json!({})).await;
    // Aborting an idle session is fine too.
    assert_eq!(
        h.post(&format!("/session/{s}/abort"), json!({})).await.ok(),
        json!(true)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn abort_answers_the_waiting_prompt_and_the_session_ends_idle() {
    let h = harness().start(|_| stalls()).await;
    let s = h.session_id().await;
    let mut events = Sse::open(&h, "/event", None).await;
    events.next().await;
    let waiting = {
        let request = h
            .request(reqwest::Method::POST, &format!("/session/{s}/message"))
            .json(&json!({"parts": [{"type": "text", "text": "take your time"}]}));
        tokio::spawn(request.send())
    };
    h.wait_for_requests(1).await;
    events.until(|f| f.is("session.status", &s)).await;
    assert!(!waiting.is_finished(), "the prompt waits for its answer");

    assert_eq!(
        h.post(&format!("/session/{s}/abort"), json!(null))
            .await
            .ok(),
        json!(true)
    );
    let response = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting prompt returns after the abort")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["info"]["role"], "assistant");
    assert_eq!(answer["info"]["sessionID"], s.as_str());
    assert_eq!(answer["info"]["error"]["name"], "MessageAbortedError");
    assert!(answer["info"]["time"]["completed"].is_u64(), "{answer}");

    events.until(|f| f.is("session.idle", &s)).await;
    assert_eq!(h.get("/session/status").await.ok(), json!({}));
    let messages = h.messages(&s).await;
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1]["info"], answer["info"]);
    assert!(h.fake.wait_for_disconnects(1, super::PATIENCE).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn todos_are_what_the_model_wrote_with_todowrite() {
    let todos = json!([
        {"content": "Write the tests", "status": "in_progress", "priority": "high", "id": "1"},
        {"content": "Ship it", "status": "pending", "priority": "low", "id": "2"}
    ]);
    let args = json!({ "todos": todos }).to_string();
    let h = harness()
        .start(move |req| {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("call_todo_1", "todowrite", &args)])
            } else {
                Response::text("planned")
            }
        })
        .await;
    let s = h.session_id().await;
    assert_eq!(h.get(&format!("/session/{s}/todo")).await.ok(), json!([]));
    let answer = h.prompt(&s, "plan the work").await;
    assert_eq!(text_of(&answer), "planned");
    assert_eq!(h.get(&format!("/session/{s}/todo")).await.ok(), todos);
}

#[tokio::test(flavor = "multi_thread")]
async fn fork_copies_the_messages_strictly_before_the_given_one_with_new_ids() {
    let h = harness().start(answers("an answer")).await;
    let original = h.session(json!({"title": "Plan"})).await;
    let s = id_of(&original);
    h.prompt(&s, "one").await;
    h.prompt(&s, "two").await;
    let before = h.messages(&s).await;
    assert_eq!(before.len(), 4);
    let original_ids: Vec<Value> = before.iter().map(|m| m["info"]["id"].clone()).collect();

    let whole = h
        .send(h.request(reqwest::Method::POST, &format!("/session/{s}/fork")))
        .await
        .ok();
    let w = id_of(&whole);
    assert_ne!(w, s);
    assert_eq!(whole["title"], "Plan (fork #1)");
    assert!(whole.get("parentID").is_none(), "a fork is a root: {whole}");
    let copied = h.messages(&w).await;
    assert_eq!(copied.len(), 4);
    for (copy, from) in copied.iter().zip(&before) {
        assert!(!original_ids.contains(&copy["info"]["id"]), "a new id");
        assert_eq!(copy["info"]["sessionID"], w.as_str());
        assert_eq!(copy["info"]["role"], from["info"]["role"]);
        assert_eq!(text_of(copy), text_of(from));
        for part in copy["parts"].as_array().unwrap() {
            assert_eq!(part["messageID"], copy["info"]["id"]);
            assert_eq!(part["sessionID"], w.as_str());
            assert!(
                from["parts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|p| p["id"] != part["id"]),
                "parts get new ids"
            );
        }
    }
    assert_eq!(copied[1]["info"]["parentID"], copied[0]["info"]["id"]);
    assert_eq!(copied[3]["info"]["parentID"], copied[2]["info"]["id"]);

    let second_user = before[2]["info"]["id"].clone();
    let partial = h
        .post(
            &format!("/session/{s}/fork"),
            json!({ "messageID": second_user }),
        )
        .await
        .ok();
    assert_eq!(partial["title"], "Plan (fork #1)");
    let partial_messages = h.messages(&id_of(&partial)).await;
    assert_eq!(
        partial_messages.len(),
        2,
        "strictly before the second prompt"
    );
    assert_eq!(text_of(&partial_messages[0]), "one");
    assert_eq!(text_of(&partial_messages[1]), "an answer");

    let again = h.post(&format!("/session/{w}/fork"), json!({})).await.ok();
    assert_eq!(again["title"], "Plan (fork #2)");
    // The original is untouched.
    assert_eq!(h.messages(&s).await, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tree_rolls_up_a_delegated_childs_usage() {
    let h = harness()
        .start(|req| {
            if !req.tool_names().contains(&"task") {
                Response::text("the child looked around")
            } else if req.last_role() == Some("user") {
                Response::tool_calls(&[(
                    "call_task_1",
                    "task",
                    r#"{"description":"Look around","prompt":"List the files","subagent_type":"general"}"#,
                )])
            } else {
                Response::text("parent done")
            }
        })
        .await;
    let s = h.session_id().await;
    let answer = h.prompt(&s, "what is here?").await;
    assert_eq!(text_of(&answer), "parent done");

    let children = array(h.get(&format!("/session/{s}/children")).await.ok());
    assert_eq!(children.len(), 1);
    let tree = h.get(&format!("/session/{s}/tree")).await.ok();
    assert_eq!(tree["info"]["id"], s.as_str());
    assert_eq!(tree["status"], json!({"type": "idle"}));
    let nodes = tree["children"].as_array().unwrap();
    assert_eq!(nodes.len(), 1);
    let child = &nodes[0];
    assert_eq!(child["info"], children[0]);
    assert_eq!(child["info"]["parentID"], s.as_str());
    assert_eq!(child["info"]["title"], "Look around (@general subagent)");
    assert_eq!(child["agent"], "general");
    assert_eq!(child["children"], json!([]));
    assert_eq!(child["usage"], child["totalUsage"]);
    assert_eq!(tree["usage"]["turns"], 2);
    assert_eq!(child["usage"]["turns"], 1);
    for key in ["input", "output", "turns"] {
        assert_eq!(
            tree["totalUsage"][key].as_u64().unwrap(),
            tree["usage"][key].as_u64().unwrap() + child["usage"][key].as_u64().unwrap(),
            "totalUsage.{key} rolls up the child: {tree}"
        );
    }
    // The child's answer: 4 words.
    assert_eq!(child["usage"]["output"], 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_busy_session_cancels_its_prompt_and_it_stays_gone() {
    let h = harness().start(|_| stalls()).await;
    let s = h.session_id().await;
    let child = id_of(&h.session(json!({"parentID": s})).await);
    let queued = h
        .post(
            &format!("/session/{s}/prompt_async"),
            json!({"parts": [{"type": "text", "text": "go"}]}),
        )
        .await;
    assert_eq!(queued.status, 204);
    h.wait_for_requests(1).await;
    h.poll("/session/status", |b| b.get(&s).is_some()).await;

    assert_eq!(h.delete(&format!("/session/{s}")).await.ok(), json!(true));
    assert!(
        h.fake.wait_for_disconnects(1, super::PATIENCE).await,
        "the model stream was dropped"
    );
    h.poll("/session/status", |b| b == &json!({})).await;
    // Whatever the cancelled loop wrote last did not bring the session back (a read waits for
    // the writes queued before it).
    for id in [&s, &child] {
        h.get(&format!("/session/{id}"))
            .await
            .error(404, "NotFoundError");
        h.get(&format!("/session/{id}/message"))
            .await
            .error(404, "NotFoundError");
    }
    assert_eq!(h.get("/session").await.ok(), json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn summarize_writes_a_summary_the_next_prompt_starts_from() {
    let h = harness()
        .start(|req: &taskforce_testkit::fake_openai::RecordedRequest| {
            if req.contains("You summarize a conversation") {
                Response::text("SUMMARY-OF-WORK")
            } else {
                Response::text("answer")
            }
        })
        .await;
    let s = h.session_id().await;
    h.prompt(&s, "the first question").await;
    let done = h
        .post(
            &format!("/session/{s}/summarize"),
            json!({"providerID": "fake", "modelID": "gpt-test"}),
        )
        .await
        .ok();
    assert_eq!(done, json!(true));
    let messages = h.messages(&s).await;
    let last = messages.last().unwrap();
    assert_eq!(last["info"]["summary"], true);
    assert_eq!(last["info"]["agent"], "compaction");
    h.prompt(&s, "the second question").await;
    let request = h.fake.requests().pop().unwrap();
    assert!(request.contains("SUMMARY-OF-WORK"));
    assert!(!request.contains("the first question"));
    h.post(
        "/session/ses_00000000000000000000000000/summarize",
        json!({"providerID": "fake", "modelID": "gpt-test"}),
    )
    .await
    .error(404, "NotFoundError");
}
