//! Sessions' `time.updated`, moved forward with every new message: touches are gathered while
//! the store is busy and written together, each followed by the session's `session.updated`.

use std::collections::HashMap;
use std::sync::Arc;

use taskforce_agents::id::SessionId;
use tokio::sync::{mpsc, oneshot};

use crate::bus::{BusHandle, Event};
use crate::store::Store;

/// A touch: the session, when, and who waits for it to be written.
type Touch = (SessionId, u64, Option<oneshot::Sender<()>>);

/// Where sessions' new messages are told, to move their `time.updated`.
#[derive(Clone)]
pub(crate) struct Toucher {
    tx: mpsc::UnboundedSender<Touch>,
}

impl Toucher {
    /// Starts the task that writes touches to `store` and publishes them on `bus`; it ends
    /// when every toucher is dropped.
    pub fn start(store: Arc<dyn Store>, bus: BusHandle) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_touches(rx, store, bus));
        Toucher { tx }
    }

    /// Session `id` got a message at `at` (epoch ms).
    pub fn touch(&self, id: &SessionId, at: u64) {
        // Closed only once the runtime is gone.
        let _ = self.tx.send((id.clone(), at, None));
    }

    /// Like [`touch`](Self::touch), and returns once the new time is stored and published (a
    /// turn's end: whoever hears of the end reads the new time).
    pub async fn touch_and_wait(&self, id: &SessionId, at: u64) {
        let (done, written) = oneshot::channel();
        if self.tx.send((id.clone(), at, Some(done))).is_ok() {
            let _ = written.await;
        }
    }
}

/// Writes the touches as they come; those that arrive while a write runs go in the next one,
/// one per session.
async fn write_touches(
    mut rx: mpsc::UnboundedReceiver<Touch>,
    store: Arc<dyn Store>,
    bus: BusHandle,
) {
    let mut batch: Vec<Touch> = Vec::new();
    while rx.recv_many(&mut batch, 1024).await > 0 {
        let mut latest: HashMap<SessionId, u64, foldhash::fast::RandomState> = HashMap::default();
        let mut waiting = Vec::new();
        for (id, at, done) in batch.drain(..) {
            let t = latest.entry(id).or_default();
            *t = (*t).max(at);
            waiting.extend(done);
        }
        match store.touch_sessions(latest.into_iter().collect()).await {
            Ok(sessions) => {
                for session in sessions {
                    bus.publish(Event::SessionUpdated {
                        info: Box::new(session),
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot update the sessions' times"),
        }
        for done in waiting {
            let _ = done.send(());
        }
    }
}
