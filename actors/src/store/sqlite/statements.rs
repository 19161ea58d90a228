//! The upsert statements of sessions, messages and parts, and writing rows with them.
//!
//! Each table has an `INSERT … ON CONFLICT DO UPDATE` statement of one row, prepared the first
//! time the connection uses it and kept as long as the connection (no lookup by its text for
//! every row), bound with the row's values as they are. Messages and parts are updated in
//! place, as if they kept their parents; a row that moves fails that statement, which runs
//! again taking every column. A session's touch is an `UPDATE` of its time alone.

use rusqlite::{Connection, Statement, params};

use crate::store::write::{Table, Upsert};

/// The SQLite statements of each table.
impl Table {
    /// The statement's head, with one row's placeholders.
    fn insert(self) -> &'static str {
        match self {
            Table::Session => {
                "INSERT INTO session (id, parent_id, project_id, title, title_folded, \
                 time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
            }
            Table::Message => {
                "INSERT INTO message (id, session_id, time_created, owner, data) \
                 VALUES (?1, ?2, ?3, ?4, ?5)"
            }
            Table::Part => {
                "INSERT INTO part (id, message_id, session_id, data) VALUES (?1, ?2, ?3, ?4)"
            }
            Table::Touch => "UPDATE session SET time_updated = max(time_updated, ?2) WHERE id = ?1",
        }
    }

    /// The statement's tail: a row that exists already takes the new values (but a session's
    /// `time_updated`, which reads take its `time.updated` from, never goes back: a whole
    /// session written from an older read keeps the newer time). `InPlace` assumes the row
    /// keeps its parents (so that SQLite need not touch their indexes nor check their foreign
    /// keys) and fails the statement, by a NULL in a `NOT NULL` column, for a row that does
    /// not; `Full` takes every column. A touch inserts nothing: it has no tail.
    fn conflict(self, update: Update) -> &'static str {
        match (self, update) {
            (Table::Touch, _) => "",
            (Table::Session, _) => {
                " ON CONFLICT (id) DO UPDATE SET \
                 parent_id = excluded.parent_id, project_id = excluded.project_id, \
                 title = excluded.title, title_folded = excluded.title_folded, \
                 time_created = excluded.time_created, \
                 time_updated = max(time_updated, excluded.time_updated), \
                 data = excluded.data"
            }
            (Table::Message, Update::InPlace) => {
                " ON CONFLICT (id) DO UPDATE SET \
                 time_created = excluded.time_created, owner = excluded.owner, \
                 data = iif(session_id IS excluded.session_id, excluded.data, NULL)"
            }
            (Table::Message, Update::Full) => {
                " ON CONFLICT (id) DO UPDATE SET \
                 session_id = excluded.session_id, time_created = excluded.time_created, \
                 owner = excluded.owner, data = excluded.data"
            }
            (Table::Part, Update::InPlace) => {
                " ON CONFLICT (id) DO UPDATE SET \
                 data = iif(message_id IS excluded.message_id \
                            AND session_id IS excluded.session_id, excluded.data, NULL)"
            }
            (Table::Part, Update::Full) => {
                " ON CONFLICT (id) DO UPDATE SET \
                 message_id = excluded.message_id, session_id = excluded.session_id, \
                 data = excluded.data"
            }
        }
    }

    /// The upsert of one row, built once.
    fn sql(self, update: Update) -> &'static str {
        static SQL: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
            let mut all = Vec::new();
            for table in Table::ALL {
                for update in [Update::InPlace, Update::Full] {
                    all.push(format!("{}{}", table.insert(), table.conflict(update)));
                }
            }
            all
        });
        &SQL[self as usize * 2 + update as usize]
    }
}

/// How an upsert's statement updates a row that exists already (see [`Table::conflict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Update {
    InPlace,
    Full,
}

/// The upsert statements of one connection, each prepared on its first use and kept.
pub(super) struct Statements<'c> {
    conn: &'c Connection,
    prepared: [Option<Statement<'c>>; 8],
}

impl<'c> Statements<'c> {
    /// No statement prepared yet on `conn`.
    pub fn new(conn: &'c Connection) -> Self {
        Statements {
            conn,
            prepared: Default::default(),
        }
    }

    /// The connection the statements are prepared on.
    pub fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// Writes one row: in place; should that fail, for a row that moves to other parents (or
    /// a real fault, which fails again), again taking every column. A failed statement is
    /// undone whole, so the second one starts from where the first did.
    pub fn write_row(&mut self, row: &Upsert) -> rusqlite::Result<()> {
        let table = row.table();
        match self.execute(Update::InPlace, row) {
            Err(_) if matches!(table, Table::Message | Table::Part) => {
                self.execute(Update::Full, row)
            }
            result => result,
        }
    }

    /// Runs `row`'s upsert statement.
    fn execute(&mut self, update: Update, row: &Upsert) -> rusqlite::Result<()> {
        let table = row.table();
        let slot = &mut self.prepared[table as usize * 2 + update as usize];
        let statement = match slot {
            Some(statement) => statement,
            None => slot.insert(self.conn.prepare(table.sql(update))?),
        };
        match row {
            Upsert::Session {
                id,
                parent,
                project,
                title,
                folded,
                created,
                updated,
                data,
            } => statement.execute(params![
                id, parent, project, title, folded, created, updated, data
            ]),
            Upsert::Message {
                id,
                session,
                created,
                owner,
                data,
            } => statement.execute(params![id, session, created, owner.as_deref(), data]),
            Upsert::Part {
                id,
                message,
                session,
                data,
            } => statement.execute(params![id, message, session, data]),
            Upsert::Touch { id, at } => statement.execute(params![id, at]),
        }
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_binds_as_many_values_as_its_table_has_columns() {
        let columns = |table| match table {
            Table::Session => 8,
            Table::Message => 5,
            Table::Part => 4,
            Table::Touch => 2,
        };
        for table in Table::ALL {
            for update in [Update::InPlace, Update::Full] {
                let sql = table.sql(update);
                assert_eq!(sql.matches('?').count(), columns(table), "{sql}");
            }
        }
    }
}
