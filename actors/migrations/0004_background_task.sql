-- Background subagents (task calls with `background: true`): one row per background child,
-- kept until its result has been delivered into its parent as a message. `delivered` = 0 rows
-- whose `data` carries a finished status are delivered when the runtime starts.

CREATE TABLE background_task (
    child_id     TEXT    NOT NULL PRIMARY KEY,
    parent_id    TEXT    NOT NULL REFERENCES session (id) ON DELETE CASCADE,
    delivered    INTEGER NOT NULL DEFAULT 0,
    time_created INTEGER NOT NULL,
    data         TEXT    NOT NULL
) STRICT;

CREATE INDEX background_task_undelivered ON background_task (delivered, time_created);
