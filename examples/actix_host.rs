//! Embedding example: an actix service whose own actor delegates work to taskforce.
//!
//! A `Helpdesk` actor (the host's code) owns a taskforce `Runtime`; other actors send it
//! `Ask` messages and get the agent's answer back, while it watches the bus for progress.
//! Offline: the scripted model answers with the question's text.
//!
//! `cargo run --example actix_host`

mod common;

use actix::prelude::*;
use futures::StreamExt;
use taskforce::{BusItem, Event, Filter, PromptInput, Runtime};

/// The host's actor: one taskforce session per question.
struct Helpdesk {
    runtime: Runtime,
}

impl Actor for Helpdesk {
    type Context = Context<Self>;
}

/// A question for the helpdesk; answers with the agent's final text.
#[derive(Message)]
#[rtype(result = "anyhow::Result<String>")]
struct Ask(String);

impl Handler<Ask> for Helpdesk {
    type Result = ResponseFuture<anyhow::Result<String>>;

    fn handle(&mut self, msg: Ask, _: &mut Self::Context) -> Self::Result {
        let runtime = self.runtime.clone();
        Box::pin(async move {
            let session = runtime.create_session(None, Some(msg.0.clone())).await?;
            let answer = runtime
                .prompt(&session.id, PromptInput::text(msg.0))
                .await?;
            Ok(answer
                .parts
                .iter()
                .filter_map(|p| p.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("\n"))
        })
    }
}

fn main() -> anyhow::Result<()> {
    let (_dir, options) = common::offline_options("echo")?;
    System::new().block_on(async move {
        let runtime = Runtime::start(options).await?;

        // Count the parts the agents produce, from the bus.
        let mut events = runtime.subscribe(Filter::All);
        let watcher = actix::spawn(async move {
            let mut parts = 0;
            while let Some(item) = events.next().await {
                if let BusItem::Event(e) = item
                    && let Event::PartUpdated { .. } = e.event
                {
                    parts += 1;
                }
            }
            parts
        });

        let helpdesk = Helpdesk { runtime }.start();
        for question in ["How do I reset my password?", "Where are the invoices?"] {
            let answer = helpdesk.send(Ask(question.into())).await??;
            println!("Q: {question}\nA: {answer}\n");
        }
        watcher.abort();
        Ok(())
    })
}
