-- The core tables of taskforce on PostgreSQL: sessions, their messages, the messages' parts, and
-- todo lists; the same tables and columns as the SQLite schema (`../0001_init.sql`).
--
-- Each row keeps the domain value as its serde JSON in `data`, as `text`, not `jsonb`: the text
-- is kept as written, so keys keep their order (tool inputs and metadata come back in OpenCode's
-- shapes byte for byte), where `jsonb` would sort them. The other columns are copies of the
-- fields that queries filter, join or order on. Every text column compares bytewise (`COLLATE
-- "C"`), as SQLite does: ids, and so parts, sort the same on both backends whatever the
-- database's locale.

CREATE TABLE session (
    id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    parent_id    TEXT COLLATE "C",
    project_id   TEXT COLLATE "C" NOT NULL,
    title        TEXT COLLATE "C" NOT NULL,
    -- The title case-folded by the application (Unicode-aware), for case-insensitive search.
    title_folded TEXT COLLATE "C" NOT NULL,
    time_created BIGINT           NOT NULL,
    time_updated BIGINT           NOT NULL,
    data         TEXT             NOT NULL
);

CREATE INDEX session_parent_idx ON session (parent_id);
CREATE INDEX session_updated_idx ON session (time_updated DESC, id DESC);

CREATE TABLE message (
    id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id   TEXT COLLATE "C" NOT NULL REFERENCES session (id) ON DELETE CASCADE,
    time_created BIGINT           NOT NULL,
    -- The order rows were first stored in (SQLite's rowid, which an upsert keeps): messages
    -- created in the same millisecond come back in that order.
    seq          BIGINT           GENERATED ALWAYS AS IDENTITY,
    data         TEXT             NOT NULL
);

CREATE INDEX message_session_idx ON message (session_id, id);

CREATE TABLE part (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    message_id TEXT COLLATE "C" NOT NULL REFERENCES message (id) ON DELETE CASCADE,
    session_id TEXT COLLATE "C" NOT NULL,
    data       TEXT             NOT NULL
);

CREATE INDEX part_message_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);

CREATE TABLE todo (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES session (id) ON DELETE CASCADE,
    position   BIGINT           NOT NULL,
    data       TEXT             NOT NULL,
    PRIMARY KEY (session_id, position)
);
