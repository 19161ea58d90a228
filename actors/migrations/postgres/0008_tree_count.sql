-- How many children each session tree (by its root) has created, for `subagent.max_per_session`
-- counted across the nodes sharing this database: one row per tree, moved by single statements
-- that PostgreSQL makes atomic.
CREATE TABLE tree_count (
    root    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    created BIGINT           NOT NULL
);
