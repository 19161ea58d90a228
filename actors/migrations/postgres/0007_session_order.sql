-- Session ids now descend (the newest session has the smallest id, as OpenCode's do), so ties
-- of the update time are broken by the creation time; ids stored before keep their form.
DROP INDEX IF EXISTS session_updated_idx;
CREATE INDEX session_updated_idx ON session (time_updated DESC, time_created DESC, id DESC);
