//! The [`Store`] trait on [`PostgresStore`]: reads of a session wait for its writes queued
//! without waiting, then run on a pooled connection; upserts go to the writer; other writes run
//! alone on the writer, in queue order.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, Part, Session, Todo};

use crate::store::write::{Upsert, rows};
use crate::store::{
    Approval, BackgroundTask, Committing, MessageWithParts, SessionEdit, SessionFilter, Store,
    StoreError, TreeCount, TreeSession, Unfinished,
};

use super::{PostgresStore, writes};
use crate::store::queries;
use crate::store::rows::database;

#[async_trait]
impl Store for PostgresStore {
    async fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        self.writes.submit(Upsert::of_session(session)?).await
    }

    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        self.writes.unflushed.settled(id.as_str()).await;
        queries::session(&mut *conn(&self.pool).await?, id).await
    }

    async fn update_session(
        &self,
        id: &SessionId,
        edit: SessionEdit,
    ) -> Result<Option<Session>, StoreError> {
        let context = format!("cannot update session {id}");
        let id = id.clone();
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    in_transaction(&w.0, &context, async |tx| {
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
        // Committed with the rows queued beside them, then read back.
        let ids = self.writes.touch(&touches).await?;
        queries::sessions_in(&mut *conn(&self.pool).await?, &ids).await
    }

    async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        self.writes.unflushed.all_settled().await;
        queries::sessions(&mut *conn(&self.pool).await?, filter).await
    }

    async fn children(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        self.writes.unflushed.all_settled().await;
        queries::children(&mut *conn(&self.pool).await?, id).await
    }

    async fn tree(&self, root: &SessionId) -> Result<Vec<TreeSession>, StoreError> {
        self.writes.unflushed.all_settled().await;
        queries::tree(&mut *conn(&self.pool).await?, root).await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        let context = format!("cannot delete session {id}");
        let id = id.clone();
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    in_transaction(&w.0, &context, async |tx| {
                        queries::delete_tree(tx, &id, &context).await
                    })
                    .await
                })
            })
            .await
    }

    async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        let upsert = Upsert::of_message(message, self.writes.runtime())?;
        self.writes.submit(upsert).await
    }

    fn queue_message(&self, message: &Message) {
        self.writes
            .enqueue(Upsert::of_message(message, self.writes.runtime()));
    }

    async fn message(
        &self,
        session: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        self.writes.unflushed.settled(session.as_str()).await;
        queries::message(&mut *conn(&self.pool).await?, session, id).await
    }

    async fn messages(&self, session: &SessionId) -> Result<Vec<MessageWithParts>, StoreError> {
        self.writes.unflushed.settled(session.as_str()).await;
        queries::messages(&mut *conn(&self.pool).await?, session).await
    }

    async fn remove_message(&self, session: &SessionId, id: &MessageId) -> Result<(), StoreError> {
        let context = format!("cannot delete message {id} of session {session}");
        let (session, id) = (session.to_string(), id.to_string());
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    queries::delete_message(&mut *conn(&w.0).await?, &session, &id, &context).await
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
        let rows = rows(sessions, messages, parts, self.writes.runtime())?;
        self.writes.submit_many(rows).await
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

    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError> {
        let context = format!("cannot delete part {id}");
        let id = id.to_string();
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    queries::delete_part(&mut *conn(&w.0).await?, &id, &context).await
                })
            })
            .await
    }

    async fn todos(&self, session: &SessionId) -> Result<Vec<Todo>, StoreError> {
        queries::todos(&mut *conn(&self.pool).await?, session).await
    }

    async fn put_todos(&self, session: &SessionId, todos: &[Todo]) -> Result<(), StoreError> {
        let context = format!("cannot store the todos of session {session}");
        let (session, list) = (session.clone(), todos.to_vec());
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(writes::todos(&w.0, session, list, context))
            })
            .await
    }

    async fn approvals(&self, project: &str) -> Result<Vec<Approval>, StoreError> {
        queries::approvals(&mut *conn(&self.pool).await?, project).await
    }

    async fn add_approvals(&self, project: &str, approvals: &[Approval]) -> Result<(), StoreError> {
        if approvals.is_empty() {
            return Ok(());
        }
        let context = format!("cannot store the approvals of project {project}");
        let (project, approvals) = (project.to_string(), approvals.to_vec());
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(writes::approvals(&w.0, project, approvals, context))
            })
            .await
    }

    async fn put_background(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let context = format!("cannot store background task {}", task.child_id);
        let task = task.clone();
        self.writes
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    queries::put_background(&mut *conn(&w.0).await?, &task, &context).await
                })
            })
            .await
    }

    async fn background(&self, child: &SessionId) -> Result<Option<BackgroundTask>, StoreError> {
        queries::background(&mut *conn(&self.pool).await?, child).await
    }

    async fn undelivered_background(&self) -> Result<Vec<BackgroundTask>, StoreError> {
        queries::undelivered(&mut *conn(&self.pool).await?).await
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
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    queries::claim_background(
                        &mut *conn(&w.0).await?,
                        &child,
                        from.as_deref(),
                        &to,
                        &context,
                    )
                    .await
                })
            })
            .await
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.writes.flush().await
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn link(&self) -> Option<String> {
        self.alive.describe()
    }

    async fn count_tree_child(
        &self,
        root: &SessionId,
        seed: Option<usize>,
        limit: usize,
    ) -> Result<TreeCount, StoreError> {
        super::trees::count(&self.pool, root, seed, limit).await
    }

    async fn uncount_tree_child(&self, root: &SessionId) -> Result<(), StoreError> {
        super::trees::uncount(&self.pool, root).await
    }

    async fn hold_alive(&self, runtime: &str) -> Result<(), StoreError> {
        self.alive
            .hold(super::alive::options_of(&self.pool), runtime)
            .await
    }

    async fn is_alive(&self, runtime: &str) -> Option<bool> {
        super::alive::is_alive(&self.pool, runtime).await
    }

    fn set_runtime(&self, runtime: &str) {
        self.writes.set_runtime(runtime);
    }

    async fn unfinished_answers(
        &self,
        session: Option<&SessionId>,
    ) -> Result<Vec<Unfinished>, StoreError> {
        match session {
            Some(session) => self.writes.unflushed.settled(session.as_str()).await,
            None => self.writes.unflushed.all_settled().await,
        }
        queries::unfinished(&mut *conn(&self.pool).await?, session).await
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
            .exclusive(context.clone(), move |w| {
                Box::pin(async move {
                    queries::claim_unfinished(
                        &mut *conn(&w.0).await?,
                        &from,
                        &to,
                        session.as_ref(),
                        &context,
                    )
                    .await
                })
            })
            .await
    }
}

/// Runs `work` in one transaction of `pool` (its reads that lock rows hold them until the
/// commit); `context` prefixes its errors.
async fn in_transaction<T>(
    pool: &sqlx::PgPool,
    context: &str,
    work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tx = pool.begin().await.map_err(database(context))?;
    let done = work(&mut tx).await?;
    tx.commit().await.map_err(database(context))?;
    Ok(done)
}

/// A connection of `pool`, for the statement at hand.
async fn conn(pool: &sqlx::PgPool) -> Result<PoolConnection<Postgres>, StoreError> {
    pool.acquire()
        .await
        .map_err(database("cannot get a connection to the database"))
}
