-- Webhooks in Evolution API's format (README, "Coming from Evolution API"): the payload
-- Evolution sends (`event`, `instance`, `data`, ...) instead of ours; `by_events` appends
-- the event's name to the URL (`/messages-upsert`), `base64` adds received media's bytes.
-- `evolution_events` keeps the names `webhook/set` was given (shown back by
-- `webhook/find`; `events` holds ours that they cover).
ALTER TABLE webhooks
    ADD COLUMN format TEXT NOT NULL DEFAULT 'paceline' CHECK (format IN ('paceline', 'evolution')),
    ADD COLUMN by_events BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN base64 BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN evolution_events TEXT[] NOT NULL DEFAULT '{}';
