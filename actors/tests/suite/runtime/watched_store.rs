//! A SQLite store that a test watches and steers: it sees each commit of sessions, messages and
//! parts before it is made (and may fail or hold it), counts reads of a session's children, and
//! holds writes of a whole session until a gate opens.

use std::sync::Arc;

use taskforce_actors::Runtime;
use taskforce_actors::store::{
    Approval, Committing, MessageWithParts, SessionEdit, SessionFilter, SqliteStore, Store,
    StoreError,
};
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};
use taskforce_testkit::fake_openai::Gate;

use super::Env;

/// What a [`WatchedStore`] is told of each commit of sessions, messages and parts, before it
/// is made; an error fails the commit (nothing of it is written).
pub(super) type OnCommit =
    Box<dyn Fn(&[&Session], &[&Message], &[&Part]) -> Result<(), StoreError> + Send + Sync>;

/// A SQLite store that shows each `put_many` commit to a test first (which may fail it, or
/// panic in it as a crashing loop would), counts its reads of a session's children and of
/// sessions' messages, can hold
/// the next commit of an answer's opening, and can hold the next write of a whole session (a
/// put or an edit) until a gate opens, counting those that arrived and ended.
pub(super) struct WatchedStore {
    pub(super) inner: SqliteStore,
    on_commit: OnCommit,
    children_reads: std::sync::atomic::AtomicUsize,
    message_reads: std::sync::atomic::AtomicUsize,
    /// The gate that holds the next write of a whole session, once set.
    hold: std::sync::Mutex<Option<Gate>>,
    /// Writes of a whole session that arrived, and that ended.
    pub(super) session_writes: tokio::sync::watch::Sender<(usize, usize)>,
    /// The gate that holds the next commit holding an answer's opening, once set.
    hold_opening: std::sync::Mutex<Option<Gate>>,
    /// The gate that holds writes of sessions' new times from a time on, once set.
    hold_touches: std::sync::Mutex<Option<(u64, Gate)>>,
    /// The gate that holds writes of completed answers of every session but one, once set.
    hold_answers: std::sync::Mutex<Option<(SessionId, Gate)>>,
}

impl WatchedStore {
    pub(super) fn new(inner: SqliteStore, on_commit: OnCommit) -> Arc<Self> {
        Arc::new(WatchedStore {
            inner,
            on_commit,
            children_reads: Default::default(),
            message_reads: Default::default(),
            hold: Default::default(),
            session_writes: Default::default(),
            hold_opening: Default::default(),
            hold_touches: Default::default(),
            hold_answers: Default::default(),
        })
    }

    /// How many times a session's children were read.
    pub(super) fn children_reads(&self) -> usize {
        self.children_reads
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many times a session's messages were read.
    pub(super) fn message_reads(&self) -> usize {
        self.message_reads.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Holds the next write of a whole session until `gate` opens.
    pub(super) fn hold_next_session_write(&self, gate: &Gate) {
        *self.hold.lock().unwrap() = Some(gate.clone());
    }

    /// Holds the next commit that holds an answer's opening (an assistant message not yet
    /// completed) until `gate` opens.
    pub(super) fn hold_next_opening(&self, gate: &Gate) {
        *self.hold_opening.lock().unwrap() = Some(gate.clone());
    }

    /// Holds every write of sessions' new times that moves one to `from` (epoch ms) or later
    /// until `gate` opens.
    pub(super) fn hold_touches_from(&self, from: u64, gate: &Gate) {
        *self.hold_touches.lock().unwrap() = Some((from, gate.clone()));
    }

    /// Holds every write of a completed answer (handed over or waited for) of any session but
    /// `except` until `gate` opens.
    pub(super) fn hold_answers_except(&self, except: &SessionId, gate: &Gate) {
        *self.hold_answers.lock().unwrap() = Some((except.clone(), gate.clone()));
    }

    /// The gate holding a write of `messages`, when one of them is a completed answer whose
    /// session's answers are held.
    fn answer_gate(&self, messages: &[&Message]) -> Option<Gate> {
        let held = self.hold_answers.lock().unwrap().clone();
        held.filter(|(except, _)| {
            messages.iter().any(|m| {
                matches!(m, Message::Assistant(a) if a.time.completed.is_some() && &a.session_id != except)
            })
        })
        .map(|(_, gate)| gate)
    }

    /// Waits until `arrived` writes of a whole session arrived and `ended` of them ended.
    pub(super) async fn session_writes(&self, arrived: usize, ended: usize) {
        let mut writes = self.session_writes.subscribe();
        let done = writes.wait_for(|&(a, e)| a >= arrived && e >= ended);
        tokio::time::timeout(taskforce_testkit::wait::PATIENCE, done)
            .await
            .expect("the session writes came")
            .unwrap();
    }

    /// Runs a write of a whole session, held while the gate set for it is shut.
    async fn write_session<T>(&self, write: impl std::future::Future<Output = T>) -> T {
        // Taken before the write counts as arrived: whoever sees it arrive knows it is held.
        let hold = self.hold.lock().unwrap().take();
        self.session_writes.send_modify(|(a, _)| *a += 1);
        if let Some(gate) = hold {
            gate.opened().await;
        }
        let done = write.await;
        self.session_writes.send_modify(|(_, e)| *e += 1);
        done
    }
}

#[async_trait::async_trait]
impl Store for WatchedStore {
    async fn put_session(&self, s: &Session) -> Result<(), StoreError> {
        self.write_session(self.inner.put_session(s)).await
    }
    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        self.inner.session(id).await
    }
    async fn update_session(
        &self,
        id: &SessionId,
        edit: SessionEdit,
    ) -> Result<Option<Session>, StoreError> {
        self.write_session(self.inner.update_session(id, edit))
            .await
    }
    async fn touch_sessions(&self, t: Vec<(SessionId, u64)>) -> Result<Vec<Session>, StoreError> {
        let hold = self.hold_touches.lock().unwrap().clone();
        if let Some((from, gate)) = hold
            && t.iter().any(|&(_, at)| at >= from)
        {
            gate.opened().await;
        }
        self.inner.touch_sessions(t).await
    }
    async fn sessions(&self, f: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        self.inner.sessions(f).await
    }
    async fn children(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        self.children_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.children(id).await
    }
    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        self.inner.delete_session(id).await
    }
    async fn put_message(&self, m: &Message) -> Result<(), StoreError> {
        self.inner.put_message(m).await
    }
    fn queue_message(&self, m: &Message) {
        self.inner.queue_message(m)
    }
    async fn message(
        &self,
        s: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        self.inner.message(s, id).await
    }
    async fn messages(&self, s: &SessionId) -> Result<Vec<MessageWithParts>, StoreError> {
        self.message_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.messages(s).await
    }
    async fn remove_message(&self, s: &SessionId, id: &MessageId) -> Result<(), StoreError> {
        self.inner.remove_message(s, id).await
    }
    async fn put_part(&self, p: &Part) -> Result<(), StoreError> {
        self.inner.put_part(p).await
    }
    async fn put_many(
        &self,
        s: &[&Session],
        m: &[&Message],
        p: &[&Part],
    ) -> Result<(), StoreError> {
        (self.on_commit)(s, m, p)?;
        let opening = m
            .iter()
            .any(|m| matches!(m, Message::Assistant(a) if a.time.completed.is_none()));
        let hold = if opening {
            self.hold_opening.lock().unwrap().take()
        } else {
            None
        };
        if let Some(gate) = hold {
            gate.opened().await;
        }
        if let Some(gate) = self.answer_gate(m) {
            gate.opened().await;
        }
        self.inner.put_many(s, m, p).await
    }
    fn put_many_ahead(&self, m: &[&Message], p: &[&Part]) -> Committing {
        if let Err(e) = (self.on_commit)(&[], m, p) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let Some(gate) = self.answer_gate(m) else {
            return self.inner.put_many_ahead(m, p);
        };
        // Held: handed over once the gate opens.
        let inner = self.inner.clone();
        let m: Vec<Message> = m.iter().map(|&m| m.clone()).collect();
        let p: Vec<Part> = p.iter().map(|&p| p.clone()).collect();
        Box::pin(async move {
            gate.opened().await;
            let m: Vec<&Message> = m.iter().collect();
            let p: Vec<&Part> = p.iter().collect();
            inner.put_many_ahead(&m, &p).await
        })
    }
    fn queue_part(&self, p: Arc<Part>) {
        self.inner.queue_part(p)
    }
    fn queue_many(&self, s: Vec<Session>, m: Vec<Arc<Message>>, p: Vec<Arc<Part>>) {
        self.inner.queue_many(s, m, p)
    }
    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError> {
        self.inner.remove_part(id).await
    }
    async fn todos(&self, s: &SessionId) -> Result<Vec<Todo>, StoreError> {
        self.inner.todos(s).await
    }
    async fn put_todos(&self, s: &SessionId, t: &[Todo]) -> Result<(), StoreError> {
        self.inner.put_todos(s, t).await
    }
    async fn approvals(&self, project: &str) -> Result<Vec<Approval>, StoreError> {
        self.inner.approvals(project).await
    }
    async fn add_approvals(&self, project: &str, a: &[Approval]) -> Result<(), StoreError> {
        self.inner.add_approvals(project, a).await
    }
}

/// A runtime on `env`'s data in a [`WatchedStore`] that lets every commit through.
pub(super) async fn watched_runtime(env: &Env) -> (Arc<WatchedStore>, Runtime) {
    failing_when(env, |_| false).await
}

/// A runtime on `env`'s data in a [`WatchedStore`] that fails ("disk full") each commit whose
/// messages `fails` picks, and lets the others through.
pub(super) async fn failing_when(
    env: &Env,
    fails: impl Fn(&[&Message]) -> bool + Send + Sync + 'static,
) -> (Arc<WatchedStore>, Runtime) {
    let store = WatchedStore::new(
        SqliteStore::open(&env.data()).await.unwrap(),
        Box::new(move |_, messages, _| {
            if fails(messages) {
                return Err(StoreError::Database("disk full".into()));
            }
            Ok(())
        }),
    );
    let rt = Runtime::start_with_store(env.options(), store.clone())
        .await
        .unwrap();
    (store, rt)
}
