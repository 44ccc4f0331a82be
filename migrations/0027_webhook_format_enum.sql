-- A webhook's payload format as a Postgres enum (it was text with a CHECK): the one
-- closed list of formats, read by the dispatcher to pick the payload's shaper.
CREATE TYPE webhook_format AS ENUM ('paceline', 'evolution');

ALTER TABLE webhooks DROP CONSTRAINT IF EXISTS webhooks_format_check;
ALTER TABLE webhooks ALTER COLUMN format DROP DEFAULT;
ALTER TABLE webhooks ALTER COLUMN format TYPE webhook_format USING format::webhook_format;
ALTER TABLE webhooks ALTER COLUMN format SET DEFAULT 'paceline';
