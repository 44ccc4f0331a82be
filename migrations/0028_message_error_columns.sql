-- A failed message's error as two columns, its code (the error table's) and its
-- detail, instead of one `<code>: <detail>` string read back by splitting it. Expand
-- first: `error` stays, written beside the two by this release so the release before
-- reads what it always did, and a trigger fills the two from `error` when a worker of
-- that release writes only `error` during a rolling upgrade. A later migration drops
-- `error` and the trigger (contract) once no such worker can run.
ALTER TABLE messages ADD COLUMN error_code text, ADD COLUMN error_detail text;

UPDATE messages
SET error_code = split_part(error, ': ', 1),
    error_detail = CASE WHEN strpos(error, ': ') > 0 THEN substr(error, strpos(error, ': ') + 2) ELSE '' END
WHERE error IS NOT NULL;

CREATE FUNCTION messages_error_columns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.error_code := split_part(NEW.error, ': ', 1);
    NEW.error_detail := CASE WHEN strpos(NEW.error, ': ') > 0 THEN substr(NEW.error, strpos(NEW.error, ': ') + 2) ELSE '' END;
    RETURN NEW;
END $$;

-- Only an update that sets `error` without the two (the release before) runs it.
CREATE TRIGGER messages_error_columns BEFORE UPDATE OF error ON messages
FOR EACH ROW WHEN (NEW.error IS NOT NULL AND NEW.error_code IS NULL)
EXECUTE FUNCTION messages_error_columns();
