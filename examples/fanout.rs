//! Embedding example: a plain tokio program fanning out many parallel agent sessions.
//!
//! The runtime runs its actors on its own thread (`Runtime::spawn_dedicated`), so the host
//! needs no actix at all. Offline: the scripted model answers each prompt with its text.
//!
//! `cargo run --example fanout [-- N]`

mod common;

use std::time::Instant;

use taskforce::{PromptInput, Runtime};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let (_dir, options) = common::offline_options("echo")?;
    let runtime = Runtime::spawn_dedicated(options)?;

    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let runtime = runtime.clone();
            tokio::spawn(async move {
                let session = runtime
                    .create_session(None, Some(format!("job {i}")))
                    .await?;
                let answer = runtime
                    .prompt(&session.id, PromptInput::text(format!("result of job {i}")))
                    .await?;
                anyhow::Ok(answer.parts.iter().filter_map(|p| p.as_text()).count())
            })
        })
        .collect();
    let mut answered = 0;
    for task in tasks {
        if task.await?? > 0 {
            answered += 1;
        }
    }
    println!(
        "{answered}/{n} sessions answered in {:?}; {} sessions stored",
        start.elapsed(),
        runtime.sessions(&Default::default()).await?.len()
    );
    Ok(())
}
