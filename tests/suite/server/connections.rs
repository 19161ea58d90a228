//! Slow, idle and numerous clients cannot exhaust the server, and a stop is prompt: header
//! deadline, per-address connection cap, event streams ended on shutdown.

use std::time::Duration;

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::Response;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Harness, PATIENCE, Sse, answers, harness, text_of};

/// Everything the server sends on `stream` until it closes the connection.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A raw `GET path` that asks the server to close the connection after answering.
fn get_and_close(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_never_finishes_its_headers_is_disconnected_but_event_streams_stay() {
    let h = harness()
        .options(|o| {
            o.header_timeout = Duration::from_millis(200);
            o.heartbeat = Duration::from_millis(300);
        })
        .start(answers("never"))
        .await;
    let mut sse = Sse::open(&h, "/event", None).await;
    assert_eq!(sse.next().await.kind(), "server.connected");
    // Half a request, then silence.
    let mut slow = TcpStream::connect(h.addr).await.unwrap();
    slow.write_all(b"GET /global/health HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut slow).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    // Nothing at all.
    let mut idle = TcpStream::connect(h.addr).await.unwrap();
    read_to_close(&mut idle).await;
    // One request, then an idle kept-alive connection.
    let mut kept = TcpStream::connect(h.addr).await.unwrap();
    kept.write_all(b"GET /global/health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut kept).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    // A prompt client is served, and the event stream, open all along, still delivers: each
    // heartbeat comes after the header deadline.
    assert_eq!(h.get("/global/health").await.ok()["healthy"], true);
    for _ in 0..2 {
        assert_eq!(sse.next().await.kind(), "server.heartbeat");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_beyond_the_per_address_cap_are_answered_503() {
    let h = harness()
        .options(|o| o.max_connections_per_ip = 2)
        .start(answers("never"))
        .await;
    let mut first = TcpStream::connect(h.addr).await.unwrap();
    let _second = TcpStream::connect(h.addr).await.unwrap();
    let mut third = TcpStream::connect(h.addr).await.unwrap();
    third
        .write_all(get_and_close("/global/health").as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut third).await;
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["name"], "ServiceUnavailable");
    assert!(
        body["data"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 2"),
        "{body}"
    );

    // The connections within the cap are served; once one closes, its slot is free again.
    first
        .write_all(get_and_close("/global/health").as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut first).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    taskforce_testkit::eventually_async("a freed slot to take a new connection", || async {
        let mut next = TcpStream::connect(h.addr).await.unwrap();
        next.write_all(get_and_close("/global/health").as_bytes())
            .await
            .unwrap();
        read_to_close(&mut next)
            .await
            .starts_with("HTTP/1.1 200 OK\r\n")
    })
    .await;
}

/// Opens `n` event streams and reads their `server.connected`.
async fn streams(h: &Harness, n: usize) -> Vec<Sse> {
    let mut all = Vec::new();
    for i in 0..n {
        let path = if i % 2 == 0 {
            "/event"
        } else {
            "/global/event"
        };
        let mut sse = Sse::open(h, path, None).await;
        assert_eq!(sse.next().await.kind(), "server.connected");
        all.push(sse);
    }
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_ends_event_streams_and_returns_within_a_second() {
    let mut h = harness().start(answers("never")).await;
    let mut open = streams(&h, 4).await;
    let took = h.stop_server().await;
    assert!(took < Duration::from_secs(1), "run_until took {took:?}");
    for sse in &mut open {
        assert!(sse.ends_within(PATIENCE).await, "the stream ended");
    }
    assert!(
        TcpStream::connect(h.addr).await.is_err(),
        "no longer accepting"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_lets_an_in_flight_prompt_finish() {
    let mut h = harness()
        .start(|_| Response::text("finished after the stop").with_delay(Duration::from_millis(100)))
        .await;
    let _open = streams(&h, 1).await;
    let s = h.session_id().await;
    let prompt = {
        let request = h
            .request(reqwest::Method::POST, &format!("/session/{s}/message"))
            .json(&json!({"parts": [{"type": "text", "text": "hi"}]}));
        tokio::spawn(async move { request.send().await })
    };
    h.wait_for_requests(1).await;
    h.stop_server().await;
    let response = prompt.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(text_of(&answer), "finished after the stop");
}
