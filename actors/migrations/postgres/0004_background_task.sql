-- Background subagents (task calls with `background: true`): one row per background child,
-- kept until its result has been delivered into its parent as a message. Undelivered rows whose
-- `data` carries a finished status are delivered when the runtime starts.

CREATE TABLE background_task (
    child_id     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    parent_id    TEXT COLLATE "C" NOT NULL REFERENCES session (id) ON DELETE CASCADE,
    delivered    BOOLEAN          NOT NULL DEFAULT FALSE,
    time_created BIGINT           NOT NULL,
    data         TEXT             NOT NULL
);

CREATE INDEX background_task_undelivered ON background_task (delivered, time_created);
