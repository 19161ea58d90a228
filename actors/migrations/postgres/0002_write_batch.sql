-- Nothing to do on PostgreSQL. On SQLite this step added a table whose trigger applied a whole
-- batch of upserts sent as one JSON row; the PostgreSQL store never wrote that way (it binds a
-- batch's rows as arrays, see `0005_drop_write_batch.sql`). The step is kept so that both
-- backends have the same versions.
SELECT 1;
