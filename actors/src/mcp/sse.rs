//! The older HTTP+SSE transport of MCP (protocol 2024-11-05), which remote servers that predate
//! streamable HTTP still speak: an event stream from `GET url` first names (`event: endpoint`)
//! the URL messages are posted to, then carries the server's messages (`event: message`).

use eventsource_stream::Eventsource;
use futures::{Sink, Stream, StreamExt};
use indexmap::IndexMap;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};

/// Why a message could not be posted.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct SseError(String);

/// The two halves of an open HTTP+SSE connection: where client messages go, and the server's
/// messages.
pub(super) type SseHalves = (
    std::pin::Pin<Box<dyn Sink<ClientJsonRpcMessage, Error = SseError> + Send>>,
    std::pin::Pin<Box<dyn Stream<Item = ServerJsonRpcMessage> + Send>>,
);

/// Opens the event stream at `url` with `headers` and waits for the endpoint it names.
pub(super) async fn open(
    url: &str,
    headers: &IndexMap<String, String>,
) -> Result<SseHalves, String> {
    let mut sent = HeaderMap::new();
    for (key, value) in headers {
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| format!("header `{key}` is not a valid header name"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("header `{key}` has a value that cannot be sent"))?;
        sent.insert(name, value);
    }
    let client = reqwest::Client::new();
    let response = client
        .get(url)
        .headers(sent.clone())
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET {url} answered {status}"));
    }
    let mut events = response.bytes_stream().eventsource();
    let endpoint = loop {
        match events.next().await {
            Some(Ok(event)) if event.event == "endpoint" => break event.data,
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(format!("reading the event stream: {e}")),
            None => return Err("the event stream ended before it named its endpoint".into()),
        }
    };
    let endpoint = reqwest::Url::parse(url)
        .and_then(|base| base.join(endpoint.trim()))
        .map_err(|e| format!("the endpoint {endpoint:?} is not a URL ({e})"))?;
    let messages = events
        .take_while(|event| std::future::ready(event.is_ok()))
        .filter_map(|event| {
            let message = event
                .ok()
                .filter(|e| e.event == "message" || e.event.is_empty());
            std::future::ready(message.and_then(|e| serde_json::from_str(&e.data).ok()))
        });
    let post = futures::sink::unfold(
        (client, endpoint, sent),
        |(client, endpoint, sent), message: ClientJsonRpcMessage| async move {
            let response = client
                .post(endpoint.clone())
                .headers(sent.clone())
                .json(&message)
                .send()
                .await
                .map_err(|e| SseError(format!("POST {endpoint}: {e}")))?;
            if !response.status().is_success() {
                return Err(SseError(format!(
                    "POST {endpoint} answered {}",
                    response.status()
                )));
            }
            Ok((client, endpoint, sent))
        },
    );
    Ok((Box::pin(post), Box::pin(messages)))
}
