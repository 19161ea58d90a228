-- The store's writer no longer sends its batches through `write_batch` as JSON: it binds the
-- rows into multi-row upserts (sessions, then messages, then parts) inside one transaction per
-- batch. The table and its trigger go.

DROP TRIGGER IF EXISTS write_batch_apply;
DROP TABLE IF EXISTS write_batch;
