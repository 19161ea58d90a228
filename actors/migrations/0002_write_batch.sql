-- Group commit in one statement: the store's writer inserts one row per batch holding every
-- upsert of the batch as JSON ({"s": sessions, "m": messages, "p": parts}, each an array of
-- column arrays); this trigger applies them (sessions, then messages, then parts, so parents
-- come first) and removes the row. One round trip and one commit per batch, all or nothing.

CREATE TABLE write_batch (
    id      INTEGER NOT NULL PRIMARY KEY,
    payload TEXT    NOT NULL
) STRICT;

CREATE TRIGGER write_batch_apply AFTER INSERT ON write_batch
BEGIN
    INSERT INTO session
        (id, parent_id, project_id, title, title_folded, time_created, time_updated, data)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5,
           value ->> 6, value ->> 7
    FROM json_each(NEW.payload, '$.s') WHERE true
    ON CONFLICT (id) DO UPDATE SET
        parent_id = excluded.parent_id, project_id = excluded.project_id,
        title = excluded.title, title_folded = excluded.title_folded,
        time_created = excluded.time_created, time_updated = excluded.time_updated,
        data = excluded.data;

    INSERT INTO message (id, session_id, time_created, data)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3
    FROM json_each(NEW.payload, '$.m') WHERE true
    ON CONFLICT (id) DO UPDATE SET
        session_id = excluded.session_id, time_created = excluded.time_created,
        data = excluded.data;

    INSERT INTO part (id, message_id, session_id, data)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3
    FROM json_each(NEW.payload, '$.p') WHERE true
    ON CONFLICT (id) DO UPDATE SET
        message_id = excluded.message_id, session_id = excluded.session_id,
        data = excluded.data;

    DELETE FROM write_batch WHERE id = NEW.id;
END;
