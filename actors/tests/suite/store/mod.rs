//! The stores against real databases: every behaviour on SQLite (a file in a temporary
//! directory) and on PostgreSQL (a fresh schema on the server `TASKFORCE_TEST_POSTGRES_URL`
//! names; without it the PostgreSQL half of each test says it skips and passes).
//!
//! A test of both is an `async fn NAME(db: Db)` listed in its file's `both!`, which makes
//! `sqlite::NAME` and `postgres::NAME` of it.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use taskforce_actors::agents::id::{MessageId, SessionId};
use taskforce_actors::agents::model::{
    AssistantError, AssistantMessage, CompactionPart, FilePart, JsonObject, Message, MessagePath,
    ModelRef, Part, PartKind, PatchPart, ReasoningPart, Session, StepFinishPart, StepStartPart,
    SubtaskPart, TextPart, Todo, TodoPriority, TodoStatus, Tokens, ToolPart, ToolStateRunning,
    UserMessage,
};
use taskforce_actors::agents::permission::{Action, Rule};
use taskforce_actors::store::{
    Approval, MessageWithParts, PostgresStore, SessionFilter, SqliteStore, Store, StoreError,
};
use taskforce_testkit::postgres::TestDatabase;
use tempfile::TempDir;

/// Makes `sqlite::NAME` and `postgres::NAME` tests of each `async fn NAME(db: Db)` listed.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = super::super::Db::new(super::super::Backend::Sqlite, stringify!($name));
                    super::$name(db.await.unwrap()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = super::super::Db::new(super::super::Backend::Postgres, stringify!($name));
                    if let Some(db) = db.await {
                        super::$name(db).await;
                    }
                }
            )*
        }
    };
}

mod claims;
mod on_postgres;
mod on_sqlite;
mod queue;
mod records;
mod rows;
mod runtime;
mod sessions;

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The database of one test: a temporary directory for SQLite, a schema of its own for
/// PostgreSQL (dropped at the end).
pub struct Db {
    backend: Backend,
    dir: TempDir,
    postgres: Option<TestDatabase>,
}

impl Db {
    /// A new, empty database; `None` for PostgreSQL when no test server is configured.
    pub async fn new(backend: Backend, test: &str) -> Option<Db> {
        let postgres = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(TestDatabase::create(test).await?),
        };
        Some(Db {
            backend,
            dir: tempfile::tempdir().unwrap(),
            postgres,
        })
    }

    /// A store on the database (again: a second store sees what the first stored).
    pub async fn open(&self) -> Arc<dyn Store> {
        match &self.postgres {
            None => Arc::new(SqliteStore::open(self.dir.path()).await.unwrap()),
            Some(pg) => Arc::new(PostgresStore::open(pg.url()).await.unwrap()),
        }
    }

    /// Runs `sql` (parameters `$1`, `$2`… in order of appearance, all text) on a connection of
    /// its own, bypassing the store.
    pub async fn exec(&self, sql: &str, binds: &[&str]) {
        match &self.postgres {
            None => {
                let mut conn = self.sqlite().await;
                let mut query = sqlx::query(sql);
                for bind in binds {
                    query = query.bind(*bind);
                }
                query.execute(&mut conn).await.unwrap();
            }
            Some(pg) => {
                let mut conn = pg.connect().await;
                let mut query = sqlx::query(sql);
                for bind in binds {
                    query = query.bind(*bind);
                }
                query.execute(&mut conn).await.unwrap();
            }
        }
    }

    /// How many rows `table` holds.
    pub async fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        match &self.postgres {
            None => {
                let (n,): (i64,) = sqlx::query_as(&sql)
                    .fetch_one(&mut self.sqlite().await)
                    .await
                    .unwrap();
                n
            }
            Some(pg) => {
                let (n,): (i64,) = sqlx::query_as(&sql)
                    .fetch_one(&mut pg.connect().await)
                    .await
                    .unwrap();
                n
            }
        }
    }

    /// A connection to the SQLite file, bypassing the store.
    async fn sqlite(&self) -> SqliteConnection {
        assert_eq!(self.backend, Backend::Sqlite);
        let options =
            SqliteConnectOptions::new().filename(self.dir.path().join(SqliteStore::FILE_NAME));
        SqliteConnection::connect_with(&options).await.unwrap()
    }
}

pub fn model() -> ModelRef {
    ModelRef::new("scripted", "echo")
}

pub fn root(title: &str, now: u64) -> Session {
    Session::new("proj", "/srv/p", title, now)
}

pub fn user(session: &Session, created: u64) -> UserMessage {
    UserMessage::new(session.id.clone(), "build", model(), created)
}

pub fn assistant(session: &Session, parent: &MessageId, created: u64) -> AssistantMessage {
    let path = MessagePath {
        cwd: PathBuf::from("/srv/p"),
        root: PathBuf::from("/srv/p"),
    };
    AssistantMessage::new(
        session.id.clone(),
        parent.clone(),
        "build",
        &model(),
        path,
        created,
    )
}

pub fn text(session: &Session, message: &MessageId, text: &str) -> Part {
    Part::new(session.id.clone(), message.clone(), TextPart::new(text))
}

pub fn input(value: serde_json::Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

pub fn ids(sessions: &[Session]) -> Vec<SessionId> {
    sessions.iter().map(|s| s.id.clone()).collect()
}

/// A session, a user message and an assistant message, all stored.
pub async fn conversation(
    store: &Arc<dyn Store>,
    title: &str,
) -> (Session, UserMessage, AssistantMessage) {
    let session = root(title, 1_000);
    let u = user(&session, 1_001);
    let a = assistant(&session, &u.id, 1_002);
    store.put_session(&session).await.unwrap();
    store.put_message(&u.clone().into()).await.unwrap();
    store.put_message(&a.clone().into()).await.unwrap();
    (session, u, a)
}

/// Stores a message with two parts and a todo list in `session`.
pub async fn fill(store: &Arc<dyn Store>, session: &Session) {
    let u = user(session, session.time.created + 1);
    store.put_message(&u.clone().into()).await.unwrap();
    store.put_part(&text(session, &u.id, "one")).await.unwrap();
    store.put_part(&text(session, &u.id, "two")).await.unwrap();
    let todos = [Todo::new("1", session.title.clone(), TodoPriority::High)];
    store.put_todos(&session.id, &todos).await.unwrap();
}

pub fn approval(permission: &str, pattern: &str, created: u64) -> Approval {
    Approval {
        permission: permission.into(),
        pattern: pattern.into(),
        created,
    }
}

/// Parts as read (shared) as plain values, to compare with what was written.
pub fn plain(parts: &[Arc<Part>]) -> Vec<Part> {
    parts.iter().map(|p| (**p).clone()).collect()
}

/// Parts as a message holds them.
pub fn shared(parts: Vec<Part>) -> Vec<Arc<Part>> {
    parts.into_iter().map(Arc::new).collect()
}

/// Whether a database error says a row's parent is missing (SQLite says `FOREIGN KEY`,
/// PostgreSQL `foreign key`).
pub fn is_foreign_key_error(text: &str) -> bool {
    text.to_lowercase().contains("foreign key")
}
