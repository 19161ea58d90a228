//! Sessions' `time.updated`, moved forward with every new message: touches that arrive together
//! are written together, each followed by the session's `session.updated`.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesOrdered;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;
use tokio::sync::{mpsc, oneshot};

use crate::bus::{BusHandle, Event};
use crate::store::{Store, StoreError};

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

/// How many writes of touches may be under way at once.
const IN_FLIGHT: usize = 4;

/// Writes the touches as they come, one per session in each write: a write begins as soon as
/// touches arrive (up to [`IN_FLIGHT`] at once), so that a touch waits for one commit of the
/// store's writer, not for the writes begun before it as well. Writes end in the order they
/// began (their sessions are published in that order): a session's times go out in order.
async fn write_touches(
    mut rx: mpsc::UnboundedReceiver<Touch>,
    store: Arc<dyn Store>,
    bus: BusHandle,
) {
    let mut batch: Vec<Touch> = Vec::new();
    let mut writing = FuturesOrdered::new();
    let mut open = true;
    while open || !writing.is_empty() {
        tokio::select! {
            // Finished writes first, so that their waiters hear as soon as they can.
            biased;
            Some((written, waiting)) = writing.next(), if !writing.is_empty() => {
                published(&bus, written, waiting);
            }
            n = rx.recv_many(&mut batch, 1024), if open && writing.len() < IN_FLIGHT => {
                if n == 0 {
                    open = false;
                    continue;
                }
                let (touches, waiting) = latest_of(&mut batch);
                let store = store.clone();
                writing.push_back(async move { (store.touch_sessions(touches).await, waiting) });
            }
        }
    }
}

/// The latest time of each session among `batch` (emptied), and who waits for them.
fn latest_of(batch: &mut Vec<Touch>) -> (Vec<(SessionId, u64)>, Vec<oneshot::Sender<()>>) {
    let mut latest: HashMap<SessionId, u64, foldhash::fast::RandomState> = HashMap::default();
    let mut waiting = Vec::new();
    for (id, at, done) in batch.drain(..) {
        let t = latest.entry(id).or_default();
        *t = (*t).max(at);
        waiting.extend(done);
    }
    (latest.into_iter().collect(), waiting)
}

/// Publishes the sessions a write of touches read back and answers its waiters.
fn published(
    bus: &BusHandle,
    written: Result<Vec<Session>, StoreError>,
    waiting: Vec<oneshot::Sender<()>>,
) {
    match written {
        Ok(sessions) => {
            for session in sessions {
                bus.publish(Event::SessionUpdated {
                    info: Arc::new(session),
                });
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot update the sessions' times"),
    }
    for done in waiting {
        let _ = done.send(());
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::bus::{BusItem, Filter};
    use crate::store::SqliteStore;

    #[actix_rt::test]
    async fn touches_sent_in_a_burst_are_stored_and_published_with_times_that_only_move_forward() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
        let bus = BusHandle::start(4096);
        let sessions: Vec<Session> = (0..3)
            .map(|i| Session::new("proj", "/srv/p", format!("s{i}"), 1_000))
            .collect();
        for s in &sessions {
            store.put_session(s).await.unwrap();
        }
        let mut events = bus.subscribe(Filter::All);
        let toucher = Toucher::start(store.clone(), bus.clone());
        // Many writes begin while earlier ones are under way; the waited touches come last.
        for at in 2_000..2_300 {
            toucher.touch(&sessions[at as usize % 3].id, at);
        }
        futures::future::join_all(
            sessions
                .iter()
                .enumerate()
                .map(|(i, s)| toucher.touch_and_wait(&s.id, 5_000 + i as u64)),
        )
        .await;

        for (i, s) in sessions.iter().enumerate() {
            let stored = store.session(&s.id).await.unwrap().unwrap();
            assert_eq!(
                stored.time.updated,
                5_000 + i as u64,
                "stored before the wait ended"
            );
        }
        // Every session's published times never go back, and its last is the waited one.
        let mut last: HashMap<SessionId, u64> = HashMap::new();
        while last.values().filter(|&&t| t >= 5_000).count() < sessions.len() {
            let Some(BusItem::Event(e)) = events.next().await else {
                panic!("the bus ended or lagged");
            };
            if let Event::SessionUpdated { info } = &e.event {
                let before = last.insert(info.id.clone(), info.time.updated).unwrap_or(0);
                assert!(
                    before <= info.time.updated,
                    "{before} then {}",
                    info.time.updated
                );
            }
        }
    }
}
