-- A session's parts are read through its messages (`message_session_idx`, then
-- `part_message_idx`), so parts need no index of their own by session: every part written
-- updates one index fewer.
DROP INDEX IF EXISTS part_session_idx;
