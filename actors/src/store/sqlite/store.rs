//! The [`Store`] trait on [`SqliteStore`]: each operation waits for what it must see (reads of
//! a session wait for its writes queued without waiting), then reads on a read connection,
//! hands an upsert to the writer, or runs an exclusive write.

use std::sync::Arc;

use async_trait::async_trait;
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};

use crate::store::{
    Approval, BackgroundTask, Committing, MessageWithParts, SessionEdit, SessionFilter, Store,
    StoreError, TreeSession, Unfinished,
};

use crate::store::rows::{database, read_back_session};
use crate::store::write::{Upsert, rows};

use super::{SqliteStore, approvals, todos};
use crate::store::queries;

#[async_trait]
impl Store for SqliteStore {
    async fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        self.writes.submit(Upsert::of_session(session)?).await
    }

    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        self.writes.unflushed.settled(id.as_str()).await;
        queries::session(&mut *self.readers.get().await, id).await
    }

    async fn update_session(
        &self,
        id: &SessionId,
        edit: SessionEdit,
    ) -> Result<Option<Session>, StoreError> {
        let context = format!("cannot update session {id}");
        let id = id.clone();
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move {
                    read_then_write(conn, &context, async |tx| {
                        queries::edit_session(tx, &id, edit, &context).await
                    })
                    .await
                })
            })
            .await
    }

    async fn touch_sessions(
        &self,
        touches: Vec<(SessionId, u64)>,
    ) -> Result<Vec<Session>, StoreError> {
        // Committed with the rows queued beside them, then read back by the thread that
        // wrote them (its pages are fresh; a reader's would be read again from the log).
        let ids = self.writes.touch(&touches).await?;
        let rows = self
            .upserts
            .sessions(&ids)
            .await
            .map_err(|e| StoreError::Database(format!("cannot read the sessions: {e}")))?;
        rows.iter().map(read_back_session).collect()
    }

    async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        self.writes.unflushed.all_settled().await;
        queries::sessions(&mut *self.readers.get().await, filter).await
    }

    async fn children(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        self.writes.unflushed.all_settled().await;
        queries::children(&mut *self.readers.get().await, id).await
    }

    async fn tree(&self, root: &SessionId) -> Result<Vec<TreeSession>, StoreError> {
        self.writes.unflushed.all_settled().await;
        queries::tree(&mut *self.readers.get().await, root).await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        let context = format!("cannot delete session {id}");
        let id = id.clone();
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move {
                    read_then_write(conn, &context, async |tx| {
                        queries::delete_tree(tx, &id, &context).await
                    })
                    .await
                })
            })
            .await
    }

    async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        self.writes
            .submit(Upsert::of_message(message, self.writes.runtime())?)
            .await
    }

    async fn message(
        &self,
        session: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        self.writes.unflushed.settled(session.as_str()).await;
        queries::message(&mut *self.readers.get().await, session, id).await
    }

    async fn messages(&self, session: &SessionId) -> Result<Vec<MessageWithParts>, StoreError> {
        self.writes.unflushed.settled(session.as_str()).await;
        queries::messages(&mut *self.readers.get().await, session).await
    }

    async fn remove_message(&self, session: &SessionId, id: &MessageId) -> Result<(), StoreError> {
        let context = format!("cannot delete message {id} of session {session}");
        let (session, id) = (session.to_string(), id.to_string());
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move {
                    queries::delete_message(&mut **conn, &session, &id, &context).await
                })
            })
            .await
    }

    async fn put_part(&self, part: &Part) -> Result<(), StoreError> {
        self.writes.submit(Upsert::of_part(part)?).await
    }

    async fn put_many(
        &self,
        sessions: &[&Session],
        messages: &[&Message],
        parts: &[&Part],
    ) -> Result<(), StoreError> {
        self.writes
            .submit_many(rows(sessions, messages, parts, self.writes.runtime())?)
            .await
    }

    async fn put_many_patiently(
        &self,
        sessions: Vec<Arc<Session>>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    ) -> Result<(), StoreError> {
        self.writes
            .submit_patiently(sessions, messages, parts)
            .await
    }

    fn hurry(&self) {
        self.writes.hurry();
    }

    fn put_many_ahead(&self, messages: &[&Message], parts: &[&Part]) -> Committing {
        match rows(&[], messages, parts, self.writes.runtime()) {
            Ok(rows) => Box::pin(self.writes.send_ahead(rows)),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    fn queue_part(&self, part: Arc<Part>) {
        self.writes.enqueue_part(part);
    }

    fn queue_many(
        &self,
        sessions: Vec<Session>,
        messages: Vec<Arc<Message>>,
        parts: Vec<Arc<Part>>,
    ) {
        self.writes.enqueue_values(sessions, messages, parts);
    }

    fn queue_message(&self, message: &Message) {
        self.writes
            .enqueue(Upsert::of_message(message, self.writes.runtime()));
    }

    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError> {
        let context = format!("cannot delete part {id}");
        let id = id.to_string();
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move { queries::delete_part(&mut **conn, &id, &context).await })
            })
            .await
    }

    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, StoreError> {
        queries::todos(&mut *self.readers.get().await, session).await
    }

    async fn put_todos(&self, session: &SessionId, todos: &[Todo]) -> Result<(), StoreError> {
        let context = format!("cannot store the todos of session {session}");
        let session = session.clone();
        let list = todos.to_vec();
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(todos::replace(conn, session, list, context))
            })
            .await
    }

    async fn approvals(&self, project: &str) -> Result<Vec<Approval>, StoreError> {
        queries::approvals(&mut *self.readers.get().await, project).await
    }

    async fn add_approvals(&self, project: &str, approvals: &[Approval]) -> Result<(), StoreError> {
        if approvals.is_empty() {
            return Ok(());
        }
        let context = format!("cannot store the approvals of project {project}");
        let (project, approvals) = (project.to_string(), approvals.to_vec());
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(approvals::insert(conn, project, approvals, context))
            })
            .await
    }

    async fn put_background(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let context = format!("cannot store background task {}", task.child_id);
        let task = task.clone();
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move { queries::put_background(&mut **conn, &task, &context).await })
            })
            .await
    }

    async fn background(&self, child: &SessionId) -> Result<Option<BackgroundTask>, StoreError> {
        queries::background(&mut *self.readers.get().await, child).await
    }

    async fn undelivered_background(&self) -> Result<Vec<BackgroundTask>, StoreError> {
        queries::undelivered(&mut *self.readers.get().await).await
    }

    async fn claim_background(
        &self,
        child: &SessionId,
        from: Option<&str>,
        to: &str,
    ) -> Result<bool, StoreError> {
        let context = format!("cannot take over background task {child}");
        let (child, from, to) = (child.clone(), from.map(str::to_string), to.to_string());
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move {
                    queries::claim_background(&mut **conn, &child, from.as_deref(), &to, &context)
                        .await
                })
            })
            .await
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.writes.flush().await
    }

    fn set_runtime(&self, runtime: &str) {
        self.writes.set_runtime(runtime);
    }

    async fn unfinished_answers(
        &self,
        session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        if let Some(session) = session {
            self.writes.unflushed.settled(session.as_str()).await;
        } else {
            self.writes.unflushed.all_settled().await;
        }
        queries::unfinished(&mut *self.readers.get().await, session).await
    }

    async fn claim_unfinished(
        &self,
        from: &str,
        to: &str,
        session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        let context = format!("cannot take over the unfinished answers of runtime {from:?}");
        let (from, to, session) = (from.to_string(), to.to_string(), session.cloned());
        self.writes
            .exclusive(context.clone(), move |conn| {
                Box::pin(async move {
                    queries::claim_unfinished(&mut **conn, &from, &to, session.as_ref(), &context)
                        .await
                })
            })
            .await
    }
}

/// Runs `work` (which reads, then writes) in one transaction that holds the database's write
/// lock from its start (`BEGIN IMMEDIATE`), so that no other connection (another runtime on the
/// same file) writes between its read and its write; `context` prefixes its errors.
async fn read_then_write<T>(
    conn: &mut sqlx::SqliteConnection,
    context: &str,
    work: impl AsyncFnOnce(&mut sqlx::SqliteConnection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    use sqlx::Connection;
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(database(context))?;
    let done = work(&mut tx).await?;
    tx.commit().await.map_err(database(context))?;
    Ok(done)
}
