//! The writer's connections: sqlx's, for the writes that need the connection to themselves,
//! and the upsert thread's, which commits a batch of upserts all or none (when that fails,
//! `write::apply` writes them row by row).

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::SqliteConnection;

use crate::store::write::{Upsert, WriteConn};

use super::upserter::Upserter;

/// What the store's writer task writes through.
#[derive(Debug)]
pub(crate) struct SqliteWriter {
    /// Deletes, claims, edits, todo lists and approvals (the writer's exclusive writes).
    conn: SqliteConnection,
    /// Sessions, messages, parts and touches.
    upserts: Upserter,
}

impl SqliteWriter {
    pub(super) fn new(conn: SqliteConnection, upserts: Upserter) -> SqliteWriter {
        SqliteWriter { conn, upserts }
    }
}

impl Deref for SqliteWriter {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl DerefMut for SqliteWriter {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}

impl WriteConn for SqliteWriter {
    type Error = String;

    fn write_all<'a>(
        &'a mut self,
        upserts: &'a [&'a Arc<Upsert>],
    ) -> impl Future<Output = Result<(), String>> + Send + 'a {
        WriteConn::write_all(&mut self.upserts, upserts)
    }

    fn write_one<'a>(
        &'a mut self,
        upsert: &'a Arc<Upsert>,
    ) -> impl Future<Output = Result<(), String>> + Send + 'a {
        WriteConn::write_one(&mut self.upserts, upsert)
    }

    type Detached = Upserter;

    /// The upsert thread takes requests in the order they are sent.
    fn detached(&self) -> Option<Upserter> {
        Some(self.upserts.clone())
    }
}

impl WriteConn for Upserter {
    type Error = String;

    fn write_all<'a>(
        &'a mut self,
        upserts: &'a [&'a Arc<Upsert>],
    ) -> impl Future<Output = Result<(), String>> + Send + 'a {
        // The thread shares the rows: the batch stays with the writer, to answer it.
        let rows = upserts.iter().map(|&u| Arc::clone(u)).collect();
        Upserter::write_all(self, rows)
    }

    fn write_one<'a>(
        &'a mut self,
        upsert: &'a Arc<Upsert>,
    ) -> impl Future<Output = Result<(), String>> + Send + 'a {
        Upserter::write_one(self, Arc::clone(upsert))
    }

    type Detached = Upserter;

    fn detached(&self) -> Option<Upserter> {
        Some(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::str::FromStr;

    use sqlx::SqliteConnection;

    use taskforce_agents::id::MessageId;
    use taskforce_agents::model::{
        AssistantMessage, Message, MessagePath, ModelRef, Part, PartKind, TextPart, UserMessage,
    };

    use taskforce_agents::id::SessionId;
    use taskforce_agents::model::Session;

    use super::*;
    use crate::store::StoreError;
    use crate::store::write::MAX_BATCH;

    /// Writes `entries` as the writer does: all together, else row by row.
    async fn apply<'a>(
        conn: &mut SqliteWriter,
        entries: impl Iterator<Item = Option<&'a Upsert>>,
    ) -> Vec<Result<(), StoreError>> {
        let shared: Vec<Option<Arc<Upsert>>> = entries.map(|e| e.cloned().map(Arc::new)).collect();
        crate::store::write::apply(conn, shared.iter().map(Option::as_ref).collect()).await
    }

    /// A fresh database file with the store's schema, and its writer (foreign keys on); the
    /// directory goes when the first is dropped.
    async fn db() -> (tempfile::TempDir, SqliteWriter) {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = super::super::migrations::test_database(dir.path()).await;
        let upserts = Upserter::open(&path, std::time::Duration::from_secs(1))
            .await
            .unwrap();
        (dir, SqliteWriter::new(conn, upserts))
    }

    fn session(title: &str) -> Upsert {
        Upsert::of_session(&Session::new("proj", "/srv/p", title, 1_000)).unwrap()
    }

    fn message(session: &str) -> Upsert {
        let session = SessionId::from_str(session).unwrap();
        let user: Message =
            UserMessage::new(session, "build", ModelRef::new("scripted", "echo"), 1_001).into();
        Upsert::of_message(&user, None).unwrap()
    }

    fn reply(session: &str, parent: &str) -> Upsert {
        let path = MessagePath {
            cwd: PathBuf::from("/srv/p"),
            root: PathBuf::from("/srv/p"),
        };
        let assistant: Message = AssistantMessage::new(
            SessionId::from_str(session).unwrap(),
            MessageId::from_str(parent).unwrap(),
            "build",
            &ModelRef::new("scripted", "echo"),
            path,
            1_002,
        )
        .into();
        Upsert::of_message(&assistant, None).unwrap()
    }

    fn part(session: &str, message: &str, text: &str) -> Part {
        Part::new(
            SessionId::from_str(session).unwrap(),
            MessageId::from_str(message).unwrap(),
            TextPart::new(text),
        )
    }

    fn upsert(part: &Part) -> Upsert {
        Upsert::of_part(part).unwrap()
    }

    /// The rows of `table` as (id, parent columns, data), ordered by id.
    async fn rows(conn: &mut SqliteConnection, table: &str) -> Vec<(String, String, String)> {
        let parents = match table {
            "session" => "coalesce(parent_id, '') || '/' || title_folded",
            "message" => "session_id",
            _ => "message_id || '/' || session_id",
        };
        sqlx::query_as(&format!(
            "SELECT id, {parents}, data FROM {table} ORDER BY id"
        ))
        .fetch_all(conn)
        .await
        .unwrap()
    }

    /// The text of a stored text part.
    fn text(data: &str) -> String {
        let part: Part = serde_json::from_str(data).unwrap();
        match part.kind {
            PartKind::Text(t) => t.text,
            other => panic!("not a text part: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_batch_applies_parents_first_and_a_faulty_row_fails_alone() {
        let (_dir, mut conn) = db().await;
        let (s1, s2) = (session("First"), session("Second"));
        let (m1, m2) = (message(s1.id()), message(s2.id()));
        let p1 = upsert(&part(s1.id(), m1.id(), "one"));
        let p2 = upsert(&part(s2.id(), m2.id(), "two"));
        let orphan = upsert(&part(s1.id(), MessageId::new().as_str(), "orphan"));
        let ghost = message(SessionId::new().as_str());
        let mut renamed = Session::new("proj", "/srv/p", "Renamed ÉTÉ", 2_000);
        renamed.id = SessionId::from_str(s1.id()).unwrap();
        let renamed = Upsert::of_session(&renamed).unwrap();
        // Children before their parents, faulty rows in the middle, a barrier, a rename last.
        let batch = [
            Some(&p1),
            Some(&m1),
            Some(&s1),
            None,
            Some(&orphan),
            Some(&s2),
            Some(&ghost),
            Some(&m2),
            Some(&p2),
            Some(&renamed),
        ];
        let results = apply(&mut conn, batch.into_iter()).await;
        let failed: Vec<usize> = (0..results.len())
            .filter(|&i| results[i].is_err())
            .collect();
        assert_eq!(failed, vec![4, 6], "{results:?}");
        for (i, faulty) in [(4, &orphan), (6, &ghost)] {
            let Err(StoreError::Database(error)) = &results[i] else {
                panic!("{:?}", results[i]);
            };
            assert!(error.contains(faulty.id()), "{error}");
            assert!(error.contains("FOREIGN KEY"), "{error}");
        }

        let sessions = rows(&mut conn, "session").await;
        assert_eq!(sessions.len(), 2);
        let first = sessions.iter().find(|s| s.0 == s1.id()).unwrap();
        assert_eq!(
            first.1, "/renamed été",
            "the last upsert wins, title folded"
        );
        let messages = rows(&mut conn, "message").await;
        assert_eq!(messages.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), {
            let mut ids = vec![m1.id(), m2.id()];
            ids.sort();
            ids
        });
        let parts = rows(&mut conn, "part").await;
        let mut expected = vec![p1.id(), p2.id()];
        expected.sort();
        assert_eq!(
            parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
            expected
        );
    }

    #[tokio::test]
    async fn a_batch_keeps_the_last_upsert_of_each_row() {
        let (_dir, mut conn) = db().await;
        let s = session("big");
        let m = message(s.id());
        let mut parts: Vec<Part> = (0..60)
            .map(|i| part(s.id(), m.id(), &format!("{i}")))
            .collect();
        let mut batch = vec![s, m];
        // Every part 6 times, round robin, so that each appears in several statements and
        // several times in one.
        for round in 0..6 {
            for (i, p) in parts.iter_mut().enumerate() {
                if let PartKind::Text(t) = &mut p.kind {
                    t.text = format!("part {i} round {round}");
                }
                batch.push(upsert(p));
            }
        }
        // And the messages of other sessions, more than a statement holds.
        for i in 0..300 {
            let other = session(&format!("other {i}"));
            batch.push(message(other.id()));
            batch.push(other);
        }
        assert!(batch.len() <= MAX_BATCH);
        let results = apply(&mut conn, batch.iter().map(Some)).await;
        assert!(results.iter().all(Result::is_ok));

        let stored = rows(&mut conn, "part").await;
        assert_eq!(stored.len(), 60);
        for (i, p) in parts.iter().enumerate() {
            let row = stored.iter().find(|r| r.0 == p.id.as_str()).unwrap();
            assert_eq!(text(&row.2), format!("part {i} round 5"));
        }
        assert_eq!(rows(&mut conn, "message").await.len(), 301);
        assert_eq!(rows(&mut conn, "session").await.len(), 301);
    }

    #[tokio::test]
    async fn a_row_may_move_to_other_parents() {
        let (_dir, mut conn) = db().await;
        let (s1, s2) = (session("one"), session("two"));
        let (m1, m2) = (message(s1.id()), message(s2.id()));
        let mut moving = part(s1.id(), m1.id(), "before");
        let stays = part(s1.id(), m1.id(), "stays");
        let batch = [&s1, &s2, &m1, &m2, &upsert(&moving), &upsert(&stays)];
        assert!(
            apply(&mut conn, batch.into_iter().map(Some))
                .await
                .iter()
                .all(Result::is_ok)
        );

        // In a batch, then alone: the part moves to m2, the message to s2.
        moving.message_id = MessageId::from_str(m2.id()).unwrap();
        moving.session_id = SessionId::from_str(s2.id()).unwrap();
        if let PartKind::Text(t) = &mut moving.kind {
            t.text = "after".into();
        }
        let batch = [upsert(&moving), upsert(&stays)];
        assert!(
            apply(&mut conn, batch.iter().map(Some))
                .await
                .iter()
                .all(Result::is_ok)
        );
        let reply = reply(s1.id(), m1.id());
        assert!(conn.write_one(&Arc::new(reply.clone())).await.is_ok());
        let Upsert::Message {
            id: reply_id,
            data,
            owner,
            ..
        } = &reply
        else {
            unreachable!()
        };
        let moved = Upsert::Message {
            id: reply_id.clone(),
            session: s2.id().to_string(),
            created: 1_002,
            owner: owner.clone(),
            data: data.replace(s1.id(), s2.id()),
        };
        assert!(conn.write_one(&Arc::new(moved)).await.is_ok());

        let parts = rows(&mut conn, "part").await;
        let row = parts.iter().find(|r| r.0 == moving.id.as_str()).unwrap();
        assert_eq!(row.1, format!("{}/{}", m2.id(), s2.id()));
        assert_eq!(text(&row.2), "after");
        let row = parts.iter().find(|r| r.0 == stays.id.as_str()).unwrap();
        assert_eq!(row.1, format!("{}/{}", m1.id(), s1.id()));
        let messages = rows(&mut conn, "message").await;
        let row = messages.iter().find(|r| &r.0 == reply_id).unwrap();
        assert_eq!(&row.1, s2.id());

        // A move to a parent that does not exist fails, and leaves the row as it was.
        let mut lost = moving.clone();
        lost.message_id = MessageId::new();
        let results = apply(&mut conn, [Some(&upsert(&lost))].into_iter()).await;
        assert!(results[0].is_err());
        let parts = rows(&mut conn, "part").await;
        let row = parts.iter().find(|r| r.0 == moving.id.as_str()).unwrap();
        assert_eq!(text(&row.2), "after");
    }

    #[tokio::test]
    async fn a_touch_moves_the_time_of_a_session_first_written_in_its_own_batch() {
        let (_dir, mut conn) = db().await;
        let s = session("new");
        let sid = SessionId::from_str(s.id()).unwrap();
        // The touches come first in the batch, the later one before the earlier, and one
        // touches a session that is not stored.
        let batch = [
            Upsert::touch(&sid, 9_000),
            Upsert::touch(&sid, 7_000),
            Upsert::touch(&SessionId::new(), 8_000),
            s,
        ];
        let results = apply(&mut conn, batch.iter().map(Some)).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let times: Vec<(String, i64)> = sqlx::query_as("SELECT id, time_updated FROM session")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        assert_eq!(times, [(sid.to_string(), 9_000)]);
    }

    #[tokio::test]
    async fn barriers_alone_write_nothing() {
        let (_dir, mut conn) = db().await;
        let results = apply(&mut conn, [None, None].into_iter()).await;
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(Result::is_ok));
    }

    #[tokio::test]
    async fn a_write_made_at_once_holds_up_neither_the_writer_nor_the_writes_queued_behind_it() {
        let (dir, conn) = db().await;
        let queue = crate::store::write::WriteQueue::start(conn);
        let (first, second) = (session("First"), session("Second"));
        // Nothing is queued, so this write goes to the connection at once; polled once it is
        // sent, and then its caller is busy elsewhere (it is not polled again for a while).
        let mut written = std::pin::pin!(queue.submit(first));
        let polled = futures::poll!(written.as_mut());
        // While it is under way, writes go through the writer (committed together), not at once.
        if polled.is_pending() {
            assert!(queue.writes_pending() > 0);
        }
        // Meanwhile a write through the writer task commits all the same.
        queue.enqueue(Ok(second));
        tokio::time::timeout(std::time::Duration::from_secs(10), queue.flush())
            .await
            .expect("the writer waited for a caller that was not polled")
            .unwrap();
        match polled {
            std::task::Poll::Ready(result) => result.unwrap(),
            std::task::Poll::Pending => written.await.unwrap(),
        }
        let mut reads = <SqliteConnection as sqlx::Connection>::connect(&format!(
            "sqlite://{}",
            dir.path().join("test.db").display()
        ))
        .await
        .unwrap();
        let titles: Vec<String> = rows(&mut reads, "session")
            .await
            .into_iter()
            .map(|(_, parents, _)| parents)
            .collect();
        assert_eq!(titles.len(), 2, "{titles:?}");
    }
}
