//! The order in which a session's writes reach the disk and its events the bus. A save is
//! committed in the background and its events go out once it is committed; an event that
//! writes nothing goes out after everything queued before it. The session's loop goes on while
//! its saves commit and waits for the disk only where it must ([`Release::settle`]): before a
//! tool runs and before its run ends.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;

use taskforce_agents::model::{Message, Part, Session};
use tokio::sync::oneshot;

use super::crash::panic_text;
use crate::bus::Event;
use crate::core::Core;
use crate::store::{Committing, StoreError};

/// A row to save, owned (see `writer::Item` for the borrowed form).
pub(crate) enum Saved {
    /// A session stored for the first time (published as created, then updated).
    NewSession(Arc<Session>),
    /// A message, published as the shared copy it is.
    Message(Arc<Message>),
    Part(Arc<Part>),
}

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
    /// (none when they went with the `Ahead` before), and the rows to publish once it is
    /// through (none for a written part).
    Ahead {
        commit: Option<Committing>,
        published: Vec<Saved>,
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
                self.core.store.queue_part(&part);
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
    pub fn hand_over(&self) {
        let mut queue = self.lock();
        if !queue.draining {
            return;
        }
        // The entries up to a session's first row, turned into `Ahead`s with their rows.
        let mut taken: Vec<(usize, Vec<Saved>, Option<Arc<Part>>)> = Vec::new();
        for (i, entry) in queue.waiting.iter_mut().enumerate() {
            match entry {
                Entry::Save(rows) if rows.iter().any(|r| matches!(r, Saved::NewSession(_))) => {
                    break;
                }
                Entry::Save(rows) => taken.push((i, std::mem::take(rows), None)),
                Entry::Write(part) => taken.push((i, Vec::new(), Some(part.clone()))),
                Entry::Publish(_) | Entry::Settled(_) | Entry::Ahead { .. } => {}
            }
        }
        if taken.is_empty() {
            return;
        }
        // All in one commit, each row in its last state.
        let mut rows = Rows::default();
        for (_, saved, written) in &taken {
            rows.add(saved);
            rows.parts.extend(written.as_deref());
        }
        let Rows {
            messages, parts, ..
        } = rows;
        let messages = last_of_each(messages, Message::id);
        let parts = last_of_each(parts, |p| &p.id);
        let mut commit = Some(self.core.store.put_many_ahead(&messages, &parts));
        drop((messages, parts));
        for (i, published, _) in taken {
            queue.waiting[i] = Entry::Ahead {
                commit: commit.take(),
                published,
            };
        }
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
                Entry::Write(p) => rows.parts.push(&**p),
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
        let messages = last_of_each(messages, Message::id);
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
                    self.core.store.put_many(&sessions, &messages, &parts).await
                } else {
                    self.core
                        .store
                        .put_many_patiently(&sessions, &messages, &parts)
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
        let ((ahead, ahead_saved), committed) = futures::join!(ahead_done, own);
        // A prompt moves its session's `time.updated` (the end of the answer does too), unless
        // the session was stored with it at that time already.
        if committed.is_ok() {
            for m in &messages {
                if let Message::User(u) = m
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
        let mut ahead_saved = ahead_saved.into_iter();
        let mut events = Vec::new();
        let mut settled = Vec::new();
        for entry in batch {
            match entry {
                Entry::Save(rows) if saved => events.extend(rows.iter().flat_map(events_of)),
                Entry::Ahead { published, .. } => {
                    if ahead_saved.next() == Some(true) {
                        events.extend(published.iter().flat_map(events_of));
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
}

/// Saved rows sorted by table, in order.
#[derive(Default)]
struct Rows<'a> {
    sessions: Vec<&'a Session>,
    messages: Vec<&'a Message>,
    parts: Vec<&'a Part>,
}

impl<'a> Rows<'a> {
    fn add(&mut self, saved: &'a [Saved]) {
        for row in saved {
            match row {
                Saved::NewSession(s) => self.sessions.push(s),
                Saved::Message(m) => self.messages.push(m),
                Saved::Part(p) => self.parts.push(p),
            }
        }
    }
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

/// `rows` without those a later row of the same key replaces, in the order of the rows kept.
fn last_of_each<T: ?Sized, K: Eq + std::hash::Hash + ?Sized>(
    rows: Vec<&T>,
    key: impl Fn(&T) -> &K,
) -> Vec<&T> {
    // A batch is mostly a handful of rows, where a scan beats hashing.
    if rows.len() <= 16 {
        let mut kept = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            if !rows[i + 1..].iter().any(|later| key(later) == key(row)) {
                kept.push(*row);
            }
        }
        return kept;
    }
    let mut seen: HashSet<&K, foldhash::fast::RandomState> = HashSet::default();
    let mut kept: Vec<&T> = rows
        .iter()
        .rev()
        .filter(|row| seen.insert(key(row)))
        .copied()
        .collect();
    kept.reverse();
    kept
}

/// The failure of writes whose drain stopped before they were committed.
fn stopped() -> StoreError {
    StoreError::Database("a session's writes stopped before they were committed".into())
}

/// The events that publish a saved row.
fn events_of(row: &Saved) -> impl Iterator<Item = Event> + use<> {
    let (first, second) = match row {
        Saved::NewSession(s) => (
            Event::SessionCreated {
                info: Arc::clone(s),
            },
            Some(Event::SessionUpdated {
                info: Arc::clone(s),
            }),
        ),
        Saved::Message(m) => (
            Event::MessageUpdated {
                info: Arc::clone(m),
            },
            None,
        ),
        Saved::Part(p) => (
            Event::PartUpdated {
                part: Arc::clone(p),
            },
            None,
        ),
    };
    std::iter::once(first).chain(second)
}

#[cfg(test)]
mod tests {
    use super::last_of_each;

    #[test]
    fn a_row_saved_twice_is_kept_in_its_last_state_and_place() {
        let rows = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2)];
        let kept = last_of_each(rows.iter().collect(), |r: &(&str, i32)| r.0);
        assert_eq!(kept, [&("a", 2), &("c", 1), &("b", 2)]);
    }

    #[test]
    fn a_large_batch_keeps_the_last_state_of_each_row_in_order() {
        let rows: Vec<(u32, u32)> = (0..40).map(|i| (i % 25, i)).collect();
        let kept = last_of_each(rows.iter().collect(), |r: &(u32, u32)| &r.0);
        let expected: Vec<&(u32, u32)> = rows.iter().filter(|r| r.1 + 25 >= 40).collect();
        assert_eq!(kept.len(), 25);
        assert_eq!(kept, expected);
    }
}
