//! The multi-row upsert statements of sessions, messages and parts, and running one of them.
//!
//! Each table has `INSERT … ON CONFLICT DO UPDATE` statements of a few fixed row counts
//! ([`CHUNKS`]), padded with NULL rows, which they skip, binding the rows' values as they are.
//! Messages and parts are updated in place, as if they kept their parents; a row that moves
//! fails its statement, which runs again taking every column.

use std::sync::LazyLock;

use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, SqliteConnection};

use crate::store::write::{Table, Upsert};

/// The SQLite statements of each table.
impl Table {
    /// The statement's head, up to the row tuples: rows whose id is NULL are padding.
    fn insert(self) -> &'static str {
        match self {
            Table::Session => {
                "INSERT INTO session (id, parent_id, project_id, title, title_folded, \
                 time_created, time_updated, data) \
                 SELECT column1, column2, column3, column4, column5, column6, column7, column8 \
                 FROM (VALUES "
            }
            Table::Message => {
                "INSERT INTO message (id, session_id, time_created, owner, data) \
                 SELECT column1, column2, column3, column4, column5 FROM (VALUES "
            }
            Table::Part => {
                "INSERT INTO part (id, message_id, session_id, data) \
                 SELECT column1, column2, column3, column4 FROM (VALUES "
            }
        }
    }

    /// How many values a row binds.
    fn columns(self) -> usize {
        match self {
            Table::Session => 8,
            Table::Message => 5,
            Table::Part => 4,
        }
    }

    /// One row's placeholders.
    fn row(self) -> &'static str {
        match self {
            Table::Session => "(?,?,?,?,?,?,?,?)",
            Table::Message => "(?,?,?,?,?)",
            Table::Part => "(?,?,?,?)",
        }
    }

    /// The statement's tail: padding is skipped, and a row that exists already takes the new
    /// values (but a session's `time_updated`, which reads take its `time.updated` from, never
    /// goes back: a whole session written from an older read keeps the newer time). `InPlace`
    /// assumes the row keeps its parents (so that SQLite need not touch their indexes nor
    /// check their foreign keys) and fails the statement, by a NULL in a
    /// `NOT NULL` column, for a row that does not; `Full` takes every column.
    fn conflict(self, update: Update) -> &'static str {
        match (self, update) {
            (Table::Session, _) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 parent_id = excluded.parent_id, project_id = excluded.project_id, \
                 title = excluded.title, title_folded = excluded.title_folded, \
                 time_created = excluded.time_created, \
                 time_updated = max(time_updated, excluded.time_updated), \
                 data = excluded.data"
            }
            (Table::Message, Update::InPlace) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 time_created = excluded.time_created, owner = excluded.owner, \
                 data = iif(session_id IS excluded.session_id, excluded.data, NULL)"
            }
            (Table::Message, Update::Full) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 session_id = excluded.session_id, time_created = excluded.time_created, \
                 owner = excluded.owner, data = excluded.data"
            }
            (Table::Part, Update::InPlace) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 data = iif(message_id IS excluded.message_id \
                            AND session_id IS excluded.session_id, excluded.data, NULL)"
            }
            (Table::Part, Update::Full) => {
                ") WHERE column1 IS NOT NULL ON CONFLICT (id) DO UPDATE SET \
                 message_id = excluded.message_id, session_id = excluded.session_id, \
                 data = excluded.data"
            }
        }
    }

    /// The upsert of as many rows as `CHUNKS[chunk]`, built once.
    fn sql(self, update: Update, chunk: usize) -> &'static str {
        static SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
            let mut all = Vec::new();
            for table in Table::ALL {
                for update in [Update::InPlace, Update::Full] {
                    for rows in CHUNKS {
                        let mut sql = String::from(table.insert());
                        for i in 0..rows {
                            if i > 0 {
                                sql.push(',');
                            }
                            sql.push_str(table.row());
                        }
                        sql.push_str(table.conflict(update));
                        all.push(sql);
                    }
                }
            }
            all
        });
        &SQL[(self as usize * 2 + update as usize) * CHUNKS.len() + chunk]
    }
}

impl Upsert {
    /// Appends the row's values to `args`, in the column order of its table's statement.
    pub(super) fn bind<'q>(&'q self, args: &mut SqliteArguments<'q>) -> Result<(), sqlx::Error> {
        let encode = sqlx::Error::Encode;
        match self {
            Upsert::Session {
                id,
                parent,
                project,
                title,
                folded,
                created,
                updated,
                data,
            } => {
                args.add(id.as_str()).map_err(encode)?;
                args.add(parent.as_deref()).map_err(encode)?;
                args.add(project.as_str()).map_err(encode)?;
                args.add(title.as_str()).map_err(encode)?;
                args.add(folded.as_str()).map_err(encode)?;
                args.add(*created).map_err(encode)?;
                args.add(*updated).map_err(encode)?;
                args.add(data.as_str()).map_err(encode)?;
            }
            Upsert::Message {
                id,
                session,
                created,
                owner,
                data,
            } => {
                args.add(id.as_str()).map_err(encode)?;
                args.add(session.as_str()).map_err(encode)?;
                args.add(*created).map_err(encode)?;
                args.add(owner.as_deref()).map_err(encode)?;
                args.add(data.as_str()).map_err(encode)?;
            }
            Upsert::Part {
                id,
                message,
                session,
                data,
            } => {
                args.add(id.as_str()).map_err(encode)?;
                args.add(message.as_str()).map_err(encode)?;
                args.add(session.as_str()).map_err(encode)?;
                args.add(data.as_str()).map_err(encode)?;
            }
        }
        Ok(())
    }
}

/// How an upsert's statement updates a row that exists already (see [`Table::conflict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Update {
    InPlace,
    Full,
}

/// The row counts of the multi-row upserts: a batch goes in statements of the largest, and
/// the rest in the smallest that holds it, padded; so each table has a handful of statements
/// to cache, not one per count, and a batch of up to 256 rows per table one statement each.
pub(super) const CHUNKS: [usize; 5] = [1, 4, 16, 64, 256];

/// How `rows` rows are cut into statements: for each, how many rows it takes and its index in
/// [`CHUNKS`].
pub(super) fn chunks(mut rows: usize) -> impl Iterator<Item = (usize, usize)> {
    std::iter::from_fn(move || {
        if rows == 0 {
            return None;
        }
        let chunk = CHUNKS
            .iter()
            .position(|&c| c >= rows)
            .unwrap_or(CHUNKS.len() - 1);
        let taken = rows.min(CHUNKS[chunk]);
        rows -= taken;
        Some((taken, chunk))
    })
}

/// Writes one upsert in a statement of its own.
pub(super) async fn run_upsert(
    conn: &mut SqliteConnection,
    upsert: &Upsert,
) -> Result<(), sqlx::Error> {
    run_chunk(conn, upsert.table(), &[upsert], 0).await
}

/// Writes the rows of one table in one statement of `CHUNKS[chunk]` rows (at least as many as
/// there are rows): in place; should that fail, for a row that moves to other parents (or a
/// real fault, which fails again), again taking every column. A failed statement is undone
/// whole, so the second one starts from where the first did.
pub(super) async fn run_chunk(
    conn: &mut SqliteConnection,
    table: Table,
    rows: &[&Upsert],
    chunk: usize,
) -> Result<(), sqlx::Error> {
    match execute(conn, table, Update::InPlace, rows, chunk).await {
        Err(_) if table != Table::Session => execute(conn, table, Update::Full, rows, chunk).await,
        result => result,
    }
}

/// Runs the upsert statement of `CHUNKS[chunk]` rows for `rows` of `table`, padded with NULL
/// rows.
async fn execute(
    conn: &mut SqliteConnection,
    table: Table,
    update: Update,
    rows: &[&Upsert],
    chunk: usize,
) -> Result<(), sqlx::Error> {
    let (columns, size) = (table.columns(), CHUNKS[chunk]);
    let mut args = SqliteArguments::default();
    args.reserve(size * columns, 0);
    for row in rows {
        row.bind(&mut args)?;
    }
    for _ in rows.len() * columns..size * columns {
        args.add(None::<&str>).map_err(sqlx::Error::Encode)?;
    }
    sqlx::query_with(table.sql(update, chunk), args)
        .execute(conn)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write::MAX_BATCH;

    #[test]
    fn chunks_cover_the_rows_with_few_statements() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(1).collect::<Vec<_>>(), vec![(1, 0)]);
        assert_eq!(chunks(5).collect::<Vec<_>>(), vec![(5, 2)]);
        assert_eq!(chunks(64).collect::<Vec<_>>(), vec![(64, 3)]);
        assert_eq!(chunks(300).collect::<Vec<_>>(), vec![(256, 4), (44, 3)]);
        for rows in 0..=MAX_BATCH {
            let cut: Vec<(usize, usize)> = chunks(rows).collect();
            assert_eq!(cut.iter().map(|(n, _)| n).sum::<usize>(), rows, "{rows}");
            assert!(cut.iter().all(|&(n, c)| 0 < n && n <= CHUNKS[c]), "{rows}");
            assert!(cut.len() <= rows.div_ceil(256), "{rows}");
        }
    }

    #[test]
    fn every_statement_binds_as_many_values_as_it_has_placeholders() {
        for table in Table::ALL {
            for update in [Update::InPlace, Update::Full] {
                for (chunk, rows) in CHUNKS.iter().enumerate() {
                    let sql = table.sql(update, chunk);
                    assert_eq!(sql.matches('?').count(), rows * table.columns(), "{sql}");
                }
            }
        }
    }
}
