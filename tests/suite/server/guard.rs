//! A web page cannot drive the server: foreign origins, foreign `Host` names (DNS rebinding)
//! and non-JSON state-changing requests are refused before anything runs.

use reqwest::Method;
use serde_json::json;

use super::{Harness, answers, harness};

/// A shell command that leaves a file behind when it runs.
fn touch(h: &Harness, name: &str) -> (String, std::path::PathBuf) {
    let marker = h.project.join(name);
    (
        json!({"agent": "build", "command": format!("touch {}", marker.display())}).to_string(),
        marker,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_origin_is_refused_before_anything_runs() {
    let h = harness().start(answers("never")).await;
    let s = h.session_id().await;
    let (body, marker) = touch(&h, "pwned-origin");
    for origin in [
        "http://evil.example",
        "https://localhost.evil.example",
        "null",
    ] {
        let answer = h
            .send(
                h.request(Method::POST, &format!("/session/{s}/shell"))
                    .header("origin", origin)
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        let message = answer.error(403, "Forbidden");
        assert!(message.contains(origin), "{message}");
        let answer = h
            .send(h.request(Method::GET, "/config").header("origin", origin))
            .await;
        answer.error(403, "Forbidden");
    }
    assert!(!marker.exists(), "the command did not run");
    assert_eq!(h.messages(&s).await.len(), 0);

    // Pages on this machine and clients that send no Origin pass.
    let answer = h
        .send(
            h.request(Method::GET, "/global/health")
                .header("origin", "http://localhost:5173"),
        )
        .await;
    assert_eq!(answer.ok()["healthy"], true);
    assert_eq!(h.get("/global/health").await.ok()["healthy"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_does_not_name_the_server_is_refused() {
    let h = harness()
        .options(|o| o.allowed_hosts = vec!["devbox.lan".into()])
        .start(answers("never"))
        .await;
    let port = h.addr.port();
    // A page on attacker.example whose name was rebound to 127.0.0.1 sends its own name as
    // Host, and no Origin on a same-origin GET.
    for host in [
        format!("attacker.example:{port}"),
        "attacker.example".to_string(),
        format!("localhost.attacker.example:{port}"),
    ] {
        let answer = h
            .send(
                h.request(Method::GET, "/config")
                    .header("host", host.as_str()),
            )
            .await;
        let message = answer.error(403, "Forbidden");
        assert!(message.contains(&host), "{message}");
        assert!(message.contains("allowed_hosts"), "{message}");
        let answer = h
            .send(
                h.request(Method::POST, "/session")
                    .header("host", host.as_str())
                    .json(&json!({})),
            )
            .await;
        answer.error(403, "Forbidden");
    }
    assert_eq!(
        h.get("/session").await.ok(),
        json!([]),
        "nothing was created"
    );

    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("DevBox.lan:{port}"),
    ] {
        let answer = h
            .send(
                h.request(Method::GET, "/global/health")
                    .header("host", host.as_str()),
            )
            .await;
        assert_eq!(answer.ok()["healthy"], true, "{host}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_cannot_post_plain_text_to_run_a_shell_command() {
    let h = harness().start(answers("never")).await;
    let s = h.session_id().await;
    let (body, marker) = touch(&h, "pwned-text");
    for content_type in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let answer = h
            .send(
                h.request(Method::POST, &format!("/session/{s}/shell"))
                    .header("content-type", content_type)
                    .body(body.clone()),
            )
            .await;
        let message = answer.error(415, "UnsupportedMediaType");
        assert!(message.contains("application/json"), "{message}");
        assert!(message.contains(content_type), "{message}");
    }
    // A body without any Content-Type is refused too.
    let answer = h
        .send(
            h.request(Method::POST, &format!("/session/{s}/shell"))
                .body(body.clone()),
        )
        .await;
    answer.error(415, "UnsupportedMediaType");
    assert!(!marker.exists(), "the command did not run");

    // JSON (with a charset) runs; a bodiless POST without Content-Type (abort) passes.
    let answer = h
        .send(
            h.request(Method::POST, &format!("/session/{s}/shell"))
                .header("content-type", "application/json; charset=utf-8")
                .body(body),
        )
        .await;
    assert_eq!(answer.ok()["role"], "assistant");
    assert!(marker.exists(), "the JSON request ran");
    let answer = h
        .send(h.request(Method::POST, &format!("/session/{s}/abort")))
        .await;
    assert_eq!(answer.ok(), json!(true));
    assert_eq!(h.delete(&format!("/session/{s}")).await.ok(), json!(true));
}
