-- How many children each session tree (by its root) has created, for `subagent.max_per_session`
-- counted across the runtimes sharing a database. The SQLite store is not shared between
-- machines and keeps the count in memory; the table is here so both schemas stay the same.
CREATE TABLE IF NOT EXISTS tree_count (
    root    TEXT    NOT NULL PRIMARY KEY,
    created INTEGER NOT NULL
);
