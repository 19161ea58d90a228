-- Nothing to do on PostgreSQL: on SQLite this step dropped the JSON batch table of
-- `0002_write_batch.sql`, which PostgreSQL never had. Kept so that both backends have the same
-- versions.
SELECT 1;
