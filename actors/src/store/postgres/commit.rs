//! Committing upserts: each table's rows in one statement that binds every column as an array
//! (`INSERT … SELECT * FROM UNNEST(…) ON CONFLICT (id) DO UPDATE`), sessions first, then
//! messages, then parts, then the sessions' touches (`UPDATE … FROM UNNEST(…)`), in one
//! transaction when it takes more than one statement (when that fails, `write::apply` writes
//! them row by row).
//!
//! One statement may not update a row twice, so a batch's rows are cut per id: of the messages
//! and parts written several times only the last write goes (each replaces the whole row); the
//! sessions written several times go in rounds of one write each, in order, since a session's
//! update time must keep the latest of them all; a session touched several times takes its
//! latest time.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{PgExecutor, PgPool};

use crate::store::write::{Table, Upsert, WriteConn};

use super::Writer;

impl WriteConn for Writer {
    type Error = sqlx::Error;

    async fn write_all(&mut self, upserts: &[&Arc<Upsert>]) -> Result<(), sqlx::Error> {
        let rows: Vec<&Upsert> = upserts.iter().map(|u| &***u).collect();
        run_batch(&self.0, &rows).await
    }

    async fn write_one(&mut self, upsert: &Arc<Upsert>) -> Result<(), sqlx::Error> {
        execute(&self.0, upsert.table(), &[&**upsert]).await
    }

    type Detached = Writer;

    /// None: the pool's connections commit in any order, so a write holds the writer's place
    /// until it is done.
    fn detached(&self) -> Option<Writer> {
        None
    }
}

/// Writes upserts all or none: per table (sessions, then messages, then parts), in as few
/// statements as the rows allow, inside one transaction unless one statement does it.
async fn run_batch(pool: &PgPool, upserts: &[&Upsert]) -> Result<(), sqlx::Error> {
    let mut tables: [Vec<&Upsert>; 4] = Default::default();
    for upsert in upserts {
        tables[upsert.table() as usize].push(upsert);
    }
    let [sessions, messages, parts, touches] = tables;
    let mut statements: Vec<(Table, Vec<&Upsert>)> = rounds(&sessions)
        .into_iter()
        .map(|rows| (Table::Session, rows))
        .collect();
    for (table, rows) in [(Table::Message, messages), (Table::Part, parts)] {
        if !rows.is_empty() {
            statements.push((table, last_of_each(&rows)));
        }
    }
    if !touches.is_empty() {
        statements.push((Table::Touch, touches));
    }
    if let [(table, rows)] = statements.as_slice() {
        return execute(pool, *table, rows).await;
    }
    let mut tx = pool.begin().await?;
    for (table, rows) in &statements {
        execute(&mut *tx, *table, rows).await?;
    }
    tx.commit().await
}

/// The rows in rounds holding each id at most once, each id's writes in their order.
fn rounds<'a>(rows: &[&'a Upsert]) -> Vec<Vec<&'a Upsert>> {
    let mut seen: HashMap<&str, usize, foldhash::fast::RandomState> = HashMap::default();
    let mut rounds: Vec<Vec<&Upsert>> = Vec::new();
    for &row in rows {
        let round = seen.entry(row.id()).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(row);
        *round += 1;
    }
    rounds
}

/// The last write of each id, in the order of those last writes.
fn last_of_each<'a>(rows: &[&'a Upsert]) -> Vec<&'a Upsert> {
    let mut last: HashMap<&str, usize, foldhash::fast::RandomState> = HashMap::default();
    for (i, row) in rows.iter().enumerate() {
        last.insert(row.id(), i);
    }
    if last.len() == rows.len() {
        return rows.to_vec();
    }
    rows.iter()
        .enumerate()
        .filter(|(i, row)| last.get(row.id()) == Some(i))
        .map(|(_, row)| *row)
        .collect()
}

/// The upsert of a table's rows, every column bound as an array. A session keeps the later of
/// its stored and written update times (a whole session written from an older read keeps the
/// newer time, its data patched to match; a session's JSON holds no free-form objects, so
/// `jsonb` may reorder its keys).
fn sql(table: Table) -> &'static str {
    match table {
        Table::Session => {
            "INSERT INTO session AS s (id, parent_id, project_id, title, title_folded, \
             time_created, time_updated, data) \
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                                  $6::int8[], $7::int8[], $8::text[]) \
             ON CONFLICT (id) DO UPDATE SET \
             parent_id = excluded.parent_id, project_id = excluded.project_id, \
             title = excluded.title, title_folded = excluded.title_folded, \
             time_created = excluded.time_created, \
             time_updated = GREATEST(s.time_updated, excluded.time_updated), \
             data = excluded.data"
        }
        Table::Message => {
            "INSERT INTO message (id, session_id, time_created, owner, data) \
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[]) \
             ON CONFLICT (id) DO UPDATE SET \
             session_id = excluded.session_id, time_created = excluded.time_created, \
             owner = excluded.owner, data = excluded.data"
        }
        Table::Part => {
            "INSERT INTO part (id, message_id, session_id, data) \
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[]) \
             ON CONFLICT (id) DO UPDATE SET \
             message_id = excluded.message_id, session_id = excluded.session_id, \
             data = excluded.data"
        }
        Table::Touch => {
            "UPDATE session AS s SET time_updated = GREATEST(s.time_updated, t.at) \
             FROM (SELECT id, MAX(at) AS at FROM UNNEST($1::text[], $2::int8[]) AS u(id, at) \
                   GROUP BY id) t \
             WHERE s.id = t.id"
        }
    }
}

/// Writes `rows` of `table` (each id at most once, but for touches) in one statement.
async fn execute<'e>(
    executor: impl PgExecutor<'e>,
    table: Table,
    rows: &[&Upsert],
) -> Result<(), sqlx::Error> {
    let query = sqlx::query(sql(table));
    let query = match table {
        Table::Session => {
            let mut columns = SessionColumns::default();
            for row in rows {
                if let Upsert::Session {
                    id,
                    parent,
                    project,
                    title,
                    folded,
                    created,
                    updated,
                    data,
                } = row
                {
                    columns.id.push(id);
                    columns.parent.push(parent.as_deref());
                    columns.project.push(project);
                    columns.title.push(title);
                    columns.folded.push(folded);
                    columns.created.push(*created);
                    columns.updated.push(*updated);
                    columns.data.push(data);
                }
            }
            query
                .bind(columns.id)
                .bind(columns.parent)
                .bind(columns.project)
                .bind(columns.title)
                .bind(columns.folded)
                .bind(columns.created)
                .bind(columns.updated)
                .bind(columns.data)
        }
        Table::Message => {
            let (mut ids, mut sessions, mut created, mut owners, mut data) =
                (vec![], vec![], vec![], vec![], vec![]);
            for row in rows {
                if let Upsert::Message {
                    id,
                    session,
                    created: at,
                    owner,
                    data: json,
                } = row
                {
                    ids.push(id.as_str());
                    sessions.push(session.as_str());
                    created.push(*at);
                    owners.push(owner.as_deref());
                    data.push(json.as_str());
                }
            }
            query
                .bind(ids)
                .bind(sessions)
                .bind(created)
                .bind(owners)
                .bind(data)
        }
        Table::Part => {
            let (mut ids, mut messages, mut sessions, mut data) = (vec![], vec![], vec![], vec![]);
            for row in rows {
                if let Upsert::Part {
                    id,
                    message,
                    session,
                    data: json,
                } = row
                {
                    ids.push(id.as_str());
                    messages.push(message.as_str());
                    sessions.push(session.as_str());
                    data.push(json.as_str());
                }
            }
            query.bind(ids).bind(messages).bind(sessions).bind(data)
        }
        Table::Touch => {
            let (mut ids, mut times) = (vec![], vec![]);
            for row in rows {
                if let Upsert::Touch { id, at } = row {
                    ids.push(id.as_str());
                    times.push(*at);
                }
            }
            query.bind(ids).bind(times)
        }
    };
    query.execute(executor).await.map(|_| ())
}

/// The columns of session rows, one array each.
#[derive(Default)]
struct SessionColumns<'a> {
    id: Vec<&'a str>,
    parent: Vec<Option<&'a str>>,
    project: Vec<&'a str>,
    title: Vec<&'a str>,
    folded: Vec<&'a str>,
    created: Vec<i64>,
    updated: Vec<i64>,
    data: Vec<&'a str>,
}
