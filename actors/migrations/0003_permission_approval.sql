-- "Always" approvals of permission asks, per project: each row allows `permission` for values
-- matching the wildcard `pattern` in every session of the project, across restarts.

CREATE TABLE permission_approval (
    project_id   TEXT    NOT NULL,
    permission   TEXT    NOT NULL,
    pattern      TEXT    NOT NULL,
    time_created INTEGER NOT NULL,
    PRIMARY KEY (project_id, permission, pattern)
) STRICT, WITHOUT ROWID;
