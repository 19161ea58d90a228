-- "Always" approvals of permission asks, per project: each row allows `permission` for values
-- matching the wildcard `pattern` in every session of the project, across restarts.

CREATE TABLE permission_approval (
    project_id   TEXT COLLATE "C" NOT NULL,
    permission   TEXT COLLATE "C" NOT NULL,
    pattern      TEXT COLLATE "C" NOT NULL,
    time_created BIGINT           NOT NULL,
    PRIMARY KEY (project_id, permission, pattern)
);
