//! The server's event stream (`GET /event`), kept open: it reconnects with `Last-Event-ID`
//! when the connection drops, and says so, so that a client can catch up.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::Method;
use taskforce_actors::bus::Event;
use tokio::sync::mpsc;

use super::Client;

/// What the event stream delivers.
#[derive(Debug, Clone)]
pub enum ServerEvent {
    /// The stream is open (again); anything missed while it was closed may need reloading.
    Connected,
    /// The stream closed; it is being reopened.
    Disconnected(String),
    /// One of the runtime's events.
    Event(Box<Event>),
}

/// The events of one server, in order, for as long as the value lives.
#[derive(Debug)]
pub struct EventStream {
    receiver: mpsc::Receiver<ServerEvent>,
    task: tokio::task::JoinHandle<()>,
}

/// The longest wait between two attempts to reopen the stream.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl EventStream {
    /// Opens `client`'s event stream.
    pub(super) fn new(client: Client) -> EventStream {
        let (sender, receiver) = mpsc::channel(1024);
        let task = tokio::spawn(follow(client, sender));
        EventStream { receiver, task }
    }

    /// The next event; `None` once the stream is dropped on the receiving side's behalf.
    pub async fn next(&mut self) -> Option<ServerEvent> {
        self.receiver.recv().await
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the stream into `sender` until nobody listens, reopening it when it drops.
async fn follow(client: Client, sender: mpsc::Sender<ServerEvent>) {
    let mut last_id: Option<String> = None;
    let mut backoff = Duration::from_millis(100);
    loop {
        let mut request = client
            .request(Method::GET, "/event")
            .header("accept", "text/event-stream");
        if let Some(id) = &last_id {
            request = request.header("last-event-id", id.as_str());
        }
        let cause = match request.send().await {
            Ok(response) if response.status().is_success() => {
                if sender.send(ServerEvent::Connected).await.is_err() {
                    return;
                }
                backoff = Duration::from_millis(100);
                let mut stream = response.bytes_stream().eventsource();
                loop {
                    match stream.next().await {
                        Some(Ok(frame)) => {
                            if !frame.id.is_empty() {
                                last_id = Some(frame.id.clone());
                            }
                            let Ok(event) = serde_json::from_str::<Event>(&frame.data) else {
                                // Heartbeats, `server.connected` and kinds this client does
                                // not know.
                                continue;
                            };
                            if sender
                                .send(ServerEvent::Event(Box::new(event)))
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                        Some(Err(e)) => break e.to_string(),
                        None => break "the server closed the stream".to_string(),
                    }
                }
            }
            Ok(response) => format!("GET /event: {}", response.status()),
            Err(e) => client.unreachable("/event", &e).to_string(),
        };
        if sender.send(ServerEvent::Disconnected(cause)).await.is_err() {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
