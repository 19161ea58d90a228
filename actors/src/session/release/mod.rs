//! The order in which a session's writes reach the disk and its events the bus. A save is
//! committed in the background and its events go out once it is committed; an event that
//! writes nothing goes out after everything queued before it. The session's loop goes on while
//! its saves commit and waits for the disk only where it must ([`Release::settle`]): before a
//! tool runs and before its run ends.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;

use taskforce_agents::model::{AssistantError, Message, Part};
use tokio::sync::{oneshot, watch};

use super::crash::panic_text;
use crate::bus::Event;
use crate::core::Core;
use crate::store::{Committing, StoreError};

mod rows;

pub(crate) use rows::Saved;
use rows::{Rows, events_of, last_of_each, owned, refs, session_of, write_again};

/// What waits for its turn.
enum Entry {
    /// Rows committed together, then published in order.
    Save(Vec<Saved>),
    /// A part written with the next commit but not published (a streaming part's text, a
    /// long call's running state: their events went out live).
    Write(Arc<Part>),
    /// An event that writes nothing.
    Publish(Event),
    /// A waiter, answered once everything before it is committed and published.
    Settled(oneshot::Sender<()>),
    /// Rows handed to the store ahead of their turn (see [`Release::hand_over`]): their commit
    /// (none when they went with the `Ahead` before), the rows (written again should that
    /// commit fail), and whether they are published once stored (not a written part).
    Ahead {
        commit: Option<Committing>,
        rows: Vec<Saved>,
        publish: bool,
    },
}

/// The entries queued and whether a drain is under way.
#[derive(Default)]
struct Queue {
    waiting: Vec<Entry>,
    /// A drain task is committing and publishing; what comes meanwhile waits for it.
    draining: bool,
    /// The first commit that failed: every settle from then on reports it.
    failed: Option<StoreError>,
    /// Sessions' first rows queued and not yet committed.
    new_sessions: usize,
    /// Told whether the rows handed over ahead are stored, once they are through.
    handed: Option<watch::Sender<Option<bool>>>,
}

/// Whether the writes a run's end handed over to the store (see [`Release::hand_over`]) were
/// stored: known once their commit, and a second try if the first failed, is through.
#[derive(Clone)]
pub(crate) struct HandedOver(watch::Receiver<Option<bool>>);

impl HandedOver {
    /// Waits until the writes are through; answers whether they are stored (not when their
    /// queue stopped first, the runtime going away).
    pub async fn stored(mut self) -> bool {
        matches!(
            self.0.wait_for(Option::is_some).await.map(|v| *v),
            Ok(Some(true))
        )
    }

    /// Whether the writes are known not to be stored.
    pub fn failed(&self) -> bool {
        *self.0.borrow() == Some(false)
    }
}

/// A session's queue of writes and events, shared by the clones of its writer.
pub(crate) struct Release {
    core: Arc<Core>,
    queue: Mutex<Queue>,
}

impl Release {
    pub fn new(core: Arc<Core>) -> Self {
        Release {
            core,
            queue: Mutex::new(Queue::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `rows` to be committed together after everything queued before them, and
    /// published once committed.
    pub fn save(self: &Arc<Self>, rows: Vec<Saved>) {
        if rows.is_empty() {
            return;
        }
        self.push(Entry::Save(rows));
    }

    /// Queues a part to be written (not published) in order with the saves.
    pub fn write(self: &Arc<Self>, part: Arc<Part>) {
        {
            let queue = self.lock();
            if !queue.draining {
                // Nothing of this session waits for the store: the store's own queue keeps the
                // order from here.
                self.core.store.queue_part(part);
                return;
            }
        }
        self.push(Entry::Write(part));
    }

    /// Publishes `events` now, or after what is queued before them.
    pub fn publish(&self, events: impl IntoIterator<Item = Event>) {
        let mut queue = self.lock();
        if queue.draining {
            queue.waiting.extend(events.into_iter().map(Entry::Publish));
        } else {
            // Under the lock, so that no drain starts publishing in between.
            self.core.bus.publish_all(events);
        }
    }

    /// Queues messages and parts for the store without waiting for their commit and publishes
    /// them at once, unless something queued before them waits for its commit (then they take
    /// their turn as a save).
    pub fn save_behind(self: &Arc<Self>, messages: Vec<Arc<Message>>, parts: Vec<Arc<Part>>) {
        let rows: Vec<Saved> = parts
            .iter()
            .cloned()
            .map(Saved::Part)
            .chain(messages.iter().cloned().map(Saved::Message))
            .collect();
        {
            let queue = self.lock();
            if !queue.draining {
                self.core.store.queue_many(Vec::new(), messages, parts);
                self.core.bus.publish_all(rows.iter().flat_map(events_of));
                return;
            }
        }
        self.push(Entry::Save(rows));
    }

    /// Hands the writes waiting for their turn to the store now, instead of after the saves
    /// before them commit: the store commits them in the order it is handed writes (after
    /// those, before any handed over later), reads of the session wait for them, and their
    /// events still go out once they are committed, in order with the rest. For a run whose
    /// end nobody waits on the disk for. A session's first row is not handed over (nor what
    /// comes after it): it takes its turn.
    pub fn hand_over(&self) -> Option<HandedOver> {
        let mut queue = self.lock();
        if !queue.draining {
            return None;
        }
        // The entries up to a session's first row, turned into `Ahead`s with their rows.
        let mut taken: Vec<(usize, Vec<Saved>, bool)> = Vec::new();
        for (i, entry) in queue.waiting.iter_mut().enumerate() {
            match entry {
                Entry::Save(rows) if rows.iter().any(|r| matches!(r, Saved::NewSession(_))) => {
                    break;
                }
                Entry::Save(rows) => taken.push((i, std::mem::take(rows), true)),
                Entry::Write(part) => taken.push((i, vec![Saved::Part(part.clone())], false)),
                Entry::Publish(_) | Entry::Settled(_) | Entry::Ahead { .. } => {}
            }
        }
        if taken.is_empty() {
            return None;
        }
        // All in one commit, each row in its last state.
        let mut rows = Rows::default();
        for (_, saved, _) in &taken {
            rows.add(saved);
        }
        let Rows {
            messages, parts, ..
        } = rows;
        let messages = refs(&last_of_each(messages, |m| m.id()));
        let parts = refs(&last_of_each(parts, |p| &p.id));
        let mut commit = Some(self.core.store.put_many_ahead(&messages, &parts));
        drop((messages, parts));
        for (i, rows, publish) in taken {
            queue.waiting[i] = Entry::Ahead {
                commit: commit.take(),
                rows,
                publish,
            };
        }
        let (told, handed) = watch::channel(None);
        queue.handed = Some(told);
        Some(HandedOver(handed))
    }

    /// Returns once everything queued so far is committed and published; answers the first
    /// commit of this queue that failed, if one did.
    pub async fn settle(&self) -> Result<(), StoreError> {
        let waiting = {
            let mut queue = self.lock();
            if queue.draining {
                let (tx, rx) = oneshot::channel();
                queue.waiting.push(Entry::Settled(tx));
                // The save under way may be held back for its burst: this waits for it.
                self.core.store.hurry();
                Some(rx)
            } else {
                None
            }
        };
        // Dropped unanswered only when the drain stopped half-way (the runtime going away).
        if let Some(rx) = waiting
            && rx.await.is_err()
        {
            return Err(self.failure().unwrap_or_else(stopped));
        }
        match &self.lock().failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Whether a session's first row is queued and not yet committed.
    pub fn stores_a_session(&self) -> bool {
        self.lock().new_sessions > 0
    }

    /// The first commit of this queue that failed so far, without waiting for those under way.
    pub fn failure(&self) -> Option<StoreError> {
        self.lock().failed.clone()
    }

    /// Queues an entry and starts a drain when none is under way.
    fn push(self: &Arc<Self>, entry: Entry) {
        let mut queue = self.lock();
        if let Entry::Save(rows) = &entry {
            queue.new_sessions += rows
                .iter()
                .filter(|r| matches!(r, Saved::NewSession(_)))
                .count();
        }
        queue.waiting.push(entry);
        if !queue.draining {
            queue.draining = true;
            drop(queue);
            tokio::spawn(Arc::clone(self).drain());
        }
    }

    /// Commits and publishes what is queued, in batches (all that is queued when one begins:
    /// what the loop queued before the drain first ran goes in its first), until nothing is.
    async fn drain(self: Arc<Self>) {
        let guard = Draining(&self);
        loop {
            let batch = {
                let mut queue = self.lock();
                if queue.waiting.is_empty() {
                    queue.draining = false;
                    std::mem::forget(guard);
                    return;
                }
                std::mem::take(&mut queue.waiting)
            };
            self.release(batch).await;
        }
    }

    /// Commits the rows of `batch` in one go, then publishes its events in order (those of its
    /// saves only when the commit went through) and answers its waiters.
    async fn release(&self, mut batch: Vec<Entry>) {
        // What was handed over ahead is in the store's queue already, before what the batch
        // writes now; an `Ahead` without a commit of its own went with the one before. Their
        // commits and the batch's are awaited together (the batch's rows go to the store at
        // once, so that nothing handed over meanwhile lands before them).
        let ahead_commits: Vec<Option<Committing>> = batch
            .iter_mut()
            .filter_map(|entry| match entry {
                Entry::Ahead { commit, .. } => Some(commit.take()),
                _ => None,
            })
            .collect();
        let ahead_done = async move {
            let mut results: Vec<Result<(), StoreError>> = Vec::new();
            let mut saved: Vec<bool> = Vec::with_capacity(ahead_commits.len());
            for commit in ahead_commits {
                if let Some(commit) = commit {
                    results.push(commit.await);
                }
                saved.push(results.last().is_none_or(Result::is_ok));
            }
            (results, saved)
        };
        let mut rows = Rows::default();
        for entry in &batch {
            match entry {
                Entry::Save(saved) => rows.add(saved),
                Entry::Write(p) => rows.parts.push(p),
                Entry::Publish(_) | Entry::Settled(_) | Entry::Ahead { .. } => {}
            }
        }
        let Rows {
            sessions,
            messages,
            parts,
        } = rows;
        // A row saved twice in the batch (an answer's opening and its end, say) is written in
        // its last state only.
        let messages = last_of_each(messages, |m| m.id());
        let parts = last_of_each(parts, |p| &p.id);
        let waited = batch.iter().any(|e| matches!(e, Entry::Settled(_)));
        let own = async {
            if sessions.is_empty() && messages.is_empty() && parts.is_empty() {
                return Ok(());
            }
            let began = std::time::Instant::now();
            // A commit that panics fails this queue (and its run) instead of leaving it stuck.
            let commit = async {
                if waited {
                    let (sessions, messages, parts) =
                        (refs(&sessions), refs(&messages), refs(&parts));
                    self.core.store.put_many(&sessions, &messages, &parts).await
                } else {
                    // Nobody waits for it yet: the store's writer encodes the rows.
                    self.core
                        .store
                        .put_many_patiently(owned(&sessions), owned(&messages), owned(&parts))
                        .await
                }
            };
            let result = AssertUnwindSafe(commit)
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    Err(StoreError::Database(format!(
                        "a commit of the session crashed: {}",
                        panic_text(&*panic)
                    )))
                });
            // How long the batch took from its hand-over to its commit, for the benchmarks.
            tracing::debug!(
                target: "taskforce_actors::session::save",
                micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
                "saved"
            );
            result
        };
        let ((mut ahead, mut ahead_saved), committed) = futures::join!(ahead_done, own);
        // Rows handed over whose commit failed are written again, waited for: the parent of
        // the run has its answer already, so they must land (but the batch's newer rows stay).
        if ahead_saved.contains(&false) {
            let failed: Vec<Saved> = failed_aheads(&batch, &ahead_saved)
                .flatten()
                .cloned()
                .collect();
            match self.write_again(&failed, &messages, &parts).await {
                Ok(()) => {
                    for e in ahead.drain(..).filter_map(Result::err) {
                        tracing::warn!(error = %e, "a session's last writes failed once and were written again");
                    }
                    ahead_saved.fill(true);
                }
                Err(e) => ahead.push(Err(e)),
            }
        }
        // A prompt moves its session's `time.updated` (the end of the answer does too), unless
        // the session was stored with it at that time already.
        if committed.is_ok() {
            for m in &messages {
                if let Message::User(u) = &***m
                    && !sessions
                        .iter()
                        .any(|s| s.id == u.session_id && s.time.updated >= u.time.created)
                {
                    self.core.toucher.touch(&u.session_id, u.time.created);
                }
            }
        }
        let new = sessions.len();
        drop((sessions, messages, parts));
        let saved = committed.is_ok();
        {
            let mut queue = self.lock();
            queue.new_sessions = queue.new_sessions.saturating_sub(new);
            for e in ahead
                .into_iter()
                .filter_map(Result::err)
                .chain(committed.err())
            {
                tracing::warn!(error = %e, "a session's save failed");
                queue.failed.get_or_insert(e);
            }
        }
        if !ahead_saved.is_empty()
            && let Some(told) = self.lock().handed.take()
        {
            told.send_replace(Some(!ahead_saved.contains(&false)));
        }
        let mut ahead_saved = ahead_saved.into_iter();
        let mut events = Vec::new();
        let mut settled = Vec::new();
        for entry in batch {
            match entry {
                Entry::Save(rows) if saved => events.extend(rows.iter().flat_map(events_of)),
                Entry::Ahead { rows, publish, .. } => {
                    if ahead_saved.next() == Some(true) && publish {
                        events.extend(rows.iter().flat_map(events_of));
                    }
                }
                Entry::Save(_) | Entry::Write(_) => {}
                Entry::Publish(e) => events.push(e),
                Entry::Settled(tx) => settled.push(tx),
            }
        }
        if !events.is_empty() {
            self.core.bus.publish_all(events);
        }
        for tx in settled {
            let _ = tx.send(());
        }
    }

    /// Writes `failed` again (see [`write_again`]); when that fails too, the session says so
    /// with a `session.error`.
    async fn write_again(
        &self,
        failed: &[Saved],
        messages: &[&Arc<Message>],
        parts: &[&Arc<Part>],
    ) -> Result<(), StoreError> {
        let result = write_again(&self.core, failed, messages, parts).await;
        if let (Err(e), Some(session_id)) = (&result, failed.first().map(session_of)) {
            self.core.bus.publish(Event::SessionError {
                session_id: Some(session_id),
                error: Some(Box::new(AssistantError::unknown(format!(
                    "the session's last writes could not be stored: {e}"
                )))),
            });
        }
        result
    }
}

/// The rows of the batch's `Ahead`s whose commit failed (`saved` false, in their order).
fn failed_aheads<'a>(batch: &'a [Entry], saved: &'a [bool]) -> impl Iterator<Item = &'a [Saved]> {
    batch
        .iter()
        .filter_map(|entry| match entry {
            Entry::Ahead { rows, .. } => Some(rows.as_slice()),
            _ => None,
        })
        .zip(saved)
        .filter_map(|(rows, saved)| (!saved).then_some(rows))
}

/// A drain under way: when it stops half-way (its task dropped with the runtime), the queue is
/// left to the next save and its waiters are let go rather than kept forever.
struct Draining<'a>(&'a Release);

impl Drop for Draining<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.lock();
        queue.draining = false;
        queue.waiting.clear();
        queue.failed.get_or_insert_with(stopped);
    }
}

/// The failure of writes whose drain stopped before they were committed.
fn stopped() -> StoreError {
    StoreError::Database("a session's writes stopped before they were committed".into())
}
