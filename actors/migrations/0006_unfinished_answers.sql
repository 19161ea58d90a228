-- Which runtime is writing an answer that is not finished yet: `owner` names it (its id, see
-- `runtimes/` in the data directory) while an assistant message has no `time.completed`, and
-- is NULL otherwise. A runtime that starts finds the answers left by runtimes that died through
-- the partial index, without reading every message. Answers left unfinished by earlier versions
-- name no runtime ('') and are taken for answers of a runtime that is gone.

ALTER TABLE message ADD COLUMN owner TEXT;

UPDATE message SET owner = ''
WHERE data ->> '$.role' = 'assistant' AND data ->> '$.time.completed' IS NULL;

CREATE INDEX message_unfinished_idx ON message (owner) WHERE owner IS NOT NULL;
