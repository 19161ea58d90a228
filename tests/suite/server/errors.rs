//! Error answers (404, 400, 413), basic auth and CORS.

use base64::Engine;
use futures::stream;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Harness, answers, harness};

const MISSING: &str = "ses_01JZZZZZZZZZZZZZZZZZZZZZZZ";

fn text_prompt() -> Value {
    json!({"parts": [{"type": "text", "text": "hi"}]})
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_session_is_404_on_every_session_route() {
    let h = harness().start(answers("never")).await;
    let m = MISSING;
    let routes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, format!("/session/{m}"), None),
        (
            Method::PATCH,
            format!("/session/{m}"),
            Some(json!({"title": "x"})),
        ),
        (Method::DELETE, format!("/session/{m}"), None),
        (Method::GET, format!("/session/{m}/children"), None),
        (Method::GET, format!("/session/{m}/todo"), None),
        (Method::GET, format!("/session/{m}/tree"), None),
        (Method::POST, format!("/session/{m}/fork"), Some(json!({}))),
        (Method::POST, format!("/session/{m}/abort"), None),
        (Method::GET, format!("/session/{m}/message"), None),
        (
            Method::POST,
            format!("/session/{m}/message"),
            Some(text_prompt()),
        ),
        (
            Method::POST,
            format!("/session/{m}/message"),
            Some(json!({"noReply": true, "parts": [{"type": "text", "text": "hi"}]})),
        ),
        (
            Method::POST,
            format!("/session/{m}/prompt_async"),
            Some(text_prompt()),
        ),
        (
            Method::GET,
            format!("/session/{m}/message/msg_01JZZZZZZZZZZZZZZZZZZZZZZZ"),
            None,
        ),
        (
            Method::POST,
            format!("/session/{m}/command"),
            Some(json!({"command": "review", "arguments": ""})),
        ),
        (
            Method::POST,
            format!("/session/{m}/shell"),
            Some(json!({"agent": "build", "command": "echo hi"})),
        ),
        (
            Method::POST,
            "/session".to_string(),
            Some(json!({"parentID": m})),
        ),
    ];
    for (method, path, body) in routes {
        let answer = h.call(method.clone(), &path, body).await;
        let message = answer.error(404, "NotFoundError");
        assert!(
            message.contains(m),
            "{method} {path}: the message names the session: {message}"
        );
    }
    // The deprecated permission route: nothing is pending there either.
    h.post(
        &format!("/session/{m}/permissions/per_abc"),
        json!({"response": "once"}),
    )
    .await
    .error(404, "NotFoundError");
    assert_eq!(
        h.get("/session").await.ok(),
        json!([]),
        "nothing was created"
    );
    assert!(h.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_ids_are_400_naming_the_parameter() {
    let h = harness().start(answers("never")).await;
    let s = h.session_id().await;
    for path in [
        "/session/not-a-session".to_string(),
        "/session/msg_01JZZZZZZZZZZZZZZZZZZZZZZZ".to_string(),
        "/session/ses_bad-id/children".to_string(),
        "/session/ses_x%20y/message".to_string(),
    ] {
        let message = h.get(&path).await.error(400, "BadRequest");
        assert!(message.contains("sessionID"), "{path}: {message}");
    }
    let message = h
        .get(&format!(
            "/session/{s}/message/prt_01JZZZZZZZZZZZZZZZZZZZZZZZ"
        ))
        .await
        .error(400, "BadRequest");
    assert!(message.contains("messageID"), "{message}");
    assert!(message.contains("msg_"), "{message}");

    let bodies = [
        (
            "/session".to_string(),
            json!({"parentID": "bogus"}),
            "parentID",
        ),
        (
            format!("/session/{s}/fork"),
            json!({"messageID": s}),
            "messageID",
        ),
        (
            format!("/session/{s}/message"),
            json!({"messageID": "msg-1", "parts": [{"type": "text", "text": "hi"}]}),
            "messageID",
        ),
    ];
    for (path, body, field) in bodies {
        let message = h.post(&path, body).await.error(400, "BadRequest");
        assert!(message.contains(field), "{path}: {message}");
    }
    assert!(h.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_bodies_and_queries_are_400_naming_the_field() {
    let h = harness().start(answers("never")).await;
    let s = h.session_id().await;
    let prompt = format!("/session/{s}/message");
    let cases = [
        (json!({"parts": "hi"}), vec!["`parts`", "invalid type"]),
        (
            json!({"parts": [{"type": "video", "url": "x"}]}),
            vec!["parts[0]", "video"],
        ),
        (
            json!({"parts": [{"type": "text"}]}),
            vec!["parts[0]", "text"],
        ),
        (json!({"noReply": true}), vec!["parts"]),
        (json!({"parts": []}), vec!["parts", "at least one part"]),
        (
            json!({"parts": [{"type": "text", "text": "hi"}], "noReply": "yes"}),
            vec!["noReply"],
        ),
        (
            json!({"parts": [{"type": "text", "text": "hi"}], "model": "fake/gpt-test"}),
            vec!["model"],
        ),
    ];
    for (body, words) in cases {
        for path in [&prompt, &format!("/session/{s}/prompt_async")] {
            let message = h.post(path, body.clone()).await.error(400, "BadRequest");
            for word in &words {
                assert!(message.contains(word), "{path} {body}: {message}");
            }
        }
    }
    let message = h
        .post_raw(&prompt, "{\"parts\": [")
        .await
        .error(400, "BadRequest");
    assert!(message.contains("request body"), "{message}");
    let message = h.post_raw(&prompt, "").await.error(400, "BadRequest");
    assert!(message.contains("request body"), "{message}");

    let others = [
        (
            Method::PATCH,
            format!("/session/{s}"),
            json!({"title": 5}),
            "title",
        ),
        (
            Method::PATCH,
            format!("/session/{s}"),
            json!({"time": {"archived": "yesterday"}}),
            "time.archived",
        ),
        (
            Method::POST,
            "/session".to_string(),
            json!({"permission": [{"permission": "bash", "pattern": "*", "action": "maybe"}]}),
            "permission[0].action",
        ),
        (
            Method::POST,
            format!("/session/{s}/shell"),
            json!({"command": "echo hi"}),
            "agent",
        ),
        (
            Method::POST,
            format!("/session/{s}/shell"),
            json!({"agent": "build", "command": "  "}),
            "command",
        ),
        (
            Method::POST,
            format!("/session/{s}/shell"),
            json!({"agent": "nobody", "command": "echo hi"}),
            "nobody",
        ),
        (
            Method::POST,
            format!("/session/{s}/command"),
            json!({"arguments": "x"}),
            "command",
        ),
        (
            Method::POST,
            format!("/session/{s}/command"),
            json!({"command": "review", "model": "no-slash"}),
            "model",
        ),
    ];
    for (method, path, body, field) in others {
        let message = h
            .call(method.clone(), &path, Some(body.clone()))
            .await
            .error(400, "BadRequest");
        assert!(message.contains(field), "{method} {path} {body}: {message}");
    }

    for (query, field) in [
        ("/session?limit=abc", "limit"),
        ("/session?roots=perhaps", "roots"),
        ("/session?start=-1", "start"),
        (&format!("/session/{s}/message?limit=x") as &str, "limit"),
        ("/session?directory=/somewhere/else", "directory"),
    ] {
        let message = h.get(query).await.error(400, "BadRequest");
        assert!(message.contains(field), "{query}: {message}");
    }
    // The project's own directory is fine, as a query or a header.
    let project = h.project.display().to_string();
    assert_eq!(
        h.get(&format!("/session?directory={project}"))
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let header = h
        .send(
            h.request(Method::GET, "/session")
                .header("x-opencode-directory", "/somewhere/else"),
        )
        .await;
    assert!(header.error(400, "BadRequest").contains("directory"));

    assert_eq!(h.messages(&s).await, Vec::<Value>::new(), "nothing stored");
    assert!(h.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_over_the_limit_is_413() {
    let h = harness()
        .options(|o| o.body_limit = 1024)
        .start(answers("small answer"))
        .await;
    let s = h.session_id().await;
    let path = format!("/session/{s}/message");
    let big = json!({"parts": [{"type": "text", "text": "x".repeat(4096)}]});
    let message = h
        .post(&path, big.clone())
        .await
        .error(413, "PayloadTooLarge");
    assert!(message.contains("request body"), "{message}");
    // Without a Content-Length (chunked) the limit holds too.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = big
        .to_string()
        .into_bytes()
        .chunks(512)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let answer = h
        .post_raw(&path, reqwest::Body::wrap_stream(stream::iter(chunks)))
        .await;
    answer.error(413, "PayloadTooLarge");
    assert!(h.fake.requests().is_empty());
    // A small body passes.
    let answer = h.prompt(&s, "short").await;
    assert_eq!(super::text_of(&answer), "small answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_route_is_404() {
    let h = harness().start(answers("never")).await;
    let s = h.session_id().await;
    for path in [
        "/nope".to_string(),
        "/session/status/extra".to_string(),
        format!("/session/{s}/unknown"),
        "/global/nothing".to_string(),
    ] {
        let answer = h.get(&path).await;
        assert_eq!(
            answer.body,
            json!({"name": "NotFoundError", "data": {"message": format!("no route for {path}")}})
        );
        assert_eq!(answer.status, 404);
    }
    // A known path with a method it does not take.
    for (method, path) in [
        (Method::DELETE, "/global/health".to_string()),
        (Method::PUT, format!("/session/{s}")),
        (Method::GET, format!("/session/{s}/abort")),
    ] {
        let answer = h.call(method.clone(), &path, None).await;
        assert!(answer.headers.contains_key("allow"), "{method} {path}");
        let message = answer.error(405, "MethodNotAllowed");
        assert!(message.contains(method.as_str()), "{message}");
    }
    assert_eq!(
        h.get(&format!("/session/{s}")).await.ok()["id"],
        s.as_str(),
        "the session is still there"
    );
}

async fn health(h: &Harness, auth: Option<(&str, &str)>) -> reqwest::Response {
    let mut builder = h.client.get(h.url("/global/health"));
    if let Some((user, password)) = auth {
        builder = builder.basic_auth(user, Some(password));
    }
    builder.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_guards_every_route_but_preflight() {
    let mut h = harness()
        .options(|o| o.password = Some("s3cret".into()))
        .start(answers("never"))
        .await;
    for auth in [
        None,
        Some(("taskforce", "wrong")),
        Some(("opencode", "s3cret")),
        Some(("taskforce", "")),
    ] {
        let response = health(&h, auth).await;
        assert_eq!(response.status(), 401, "{auth:?}");
        assert!(
            response.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Basic"),
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["name"], "Unauthorized");
        assert!(
            body["data"]["message"]
                .as_str()
                .unwrap()
                .contains("taskforce")
        );
    }
    for path in ["/session", "/event", "/global/event", "/nope"] {
        assert_eq!(h.get(path).await.status, 401, "{path}");
    }
    assert_eq!(
        h.post("/session", json!({})).await.status,
        401,
        "nothing is created without credentials"
    );

    let response = health(&h, Some(("taskforce", "s3cret"))).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["healthy"], true);
    // The scheme is case-insensitive (RFC 7235), as OpenCode's server takes it.
    let token = base64::engine::general_purpose::STANDARD.encode("taskforce:s3cret");
    for value in [format!("basic {token}"), format!("BASIC {token}")] {
        let answer = h
            .send(
                h.client
                    .get(h.url("/global/health"))
                    .header("authorization", value.as_str()),
            )
            .await;
        assert_eq!(answer.ok()["healthy"], true, "{value}");
    }
    let answer = h
        .send(
            h.client
                .get(h.url("/global/health"))
                .header("authorization", format!("Bearer {token}")),
        )
        .await;
    assert_eq!(answer.status, 401);

    let preflight = h
        .client
        .request(Method::OPTIONS, h.url("/session"))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );

    h.auth = Some(("taskforce".into(), "s3cret".into()));
    let created = h.session(json!({"title": "authorized"})).await;
    assert_eq!(created["title"], "authorized");
    assert_eq!(h.get("/session").await.ok().as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn cors_answers_local_origins_only() {
    let h = harness().start(answers("never")).await;
    for origin in ["http://localhost:3000", "http://127.0.0.1:5173"] {
        let answer = h
            .send(
                h.request(Method::GET, "/global/health")
                    .header("origin", origin),
            )
            .await;
        assert_eq!(answer.headers["access-control-allow-origin"], origin);
        assert_eq!(answer.ok()["healthy"], true);
        let preflight = h
            .send(
                h.request(Method::OPTIONS, "/session/status")
                    .header("origin", origin)
                    .header("access-control-request-method", "PATCH"),
            )
            .await;
        assert!(preflight.status.is_success());
        assert_eq!(preflight.headers["access-control-allow-origin"], origin);
        let methods = preflight.headers["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(methods.contains("PATCH"), "{methods}");
    }
    for origin in [
        "http://evil.com",
        "http://localhost.evil.com",
        "https://app.opencode.ai",
    ] {
        let answer = h
            .send(
                h.request(Method::GET, "/global/health")
                    .header("origin", origin),
            )
            .await;
        assert!(
            answer.headers.get("access-control-allow-origin").is_none(),
            "{origin}: {:?}",
            answer.headers
        );
        let preflight = h
            .send(
                h.request(Method::OPTIONS, "/session")
                    .header("origin", origin)
                    .header("access-control-request-method", "POST"),
            )
            .await;
        assert!(
            preflight
                .headers
                .get("access-control-allow-origin")
                .is_none(),
            "{origin}"
        );
    }
}
