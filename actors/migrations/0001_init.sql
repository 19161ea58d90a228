-- The core tables of taskforce: sessions, their messages, the messages' parts, and todo lists.
-- Each row keeps the domain value as its serde JSON in `data` (OpenCode's shapes); the other
-- columns are copies of the fields that queries filter, join or order on.

CREATE TABLE session (
    id           TEXT    NOT NULL PRIMARY KEY,
    parent_id    TEXT,
    project_id   TEXT    NOT NULL,
    title        TEXT    NOT NULL,
    -- The title case-folded by the application (Unicode-aware), for case-insensitive search.
    title_folded TEXT    NOT NULL,
    time_created INTEGER NOT NULL,
    time_updated INTEGER NOT NULL,
    data         TEXT    NOT NULL
) STRICT;

CREATE INDEX session_parent_idx ON session (parent_id);
CREATE INDEX session_updated_idx ON session (time_updated DESC, id DESC);

CREATE TABLE message (
    id           TEXT    NOT NULL PRIMARY KEY,
    session_id   TEXT    NOT NULL REFERENCES session (id) ON DELETE CASCADE,
    time_created INTEGER NOT NULL,
    data         TEXT    NOT NULL
) STRICT;

CREATE INDEX message_session_idx ON message (session_id, id);

CREATE TABLE part (
    id         TEXT NOT NULL PRIMARY KEY,
    message_id TEXT NOT NULL REFERENCES message (id) ON DELETE CASCADE,
    session_id TEXT NOT NULL,
    data       TEXT NOT NULL
) STRICT;

CREATE INDEX part_message_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);

CREATE TABLE todo (
    session_id TEXT    NOT NULL REFERENCES session (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    data       TEXT    NOT NULL,
    PRIMARY KEY (session_id, position)
) STRICT, WITHOUT ROWID;
