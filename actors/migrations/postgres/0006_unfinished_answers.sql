-- Which runtime is writing an answer that is not finished yet: `owner` names it (its id) while
-- an assistant message has no `time.completed`, and is NULL otherwise. A runtime that starts
-- finds the answers left by runtimes that died through the partial index, without reading every
-- message. Answers left unfinished before this step name no runtime ('') and are taken for
-- answers of a runtime that is gone.

ALTER TABLE message ADD COLUMN owner TEXT COLLATE "C";

UPDATE message SET owner = ''
WHERE data::jsonb ->> 'role' = 'assistant' AND data::jsonb #>> '{time,completed}' IS NULL;

CREATE INDEX message_unfinished_idx ON message (owner) WHERE owner IS NOT NULL;
