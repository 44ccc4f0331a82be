-- A delivery's attempts as the delivery log shows them (GET .../deliveries/{id}): the
-- last 10, each with its time, URL, the endpoint's status, latency, error, the request's
-- size and the first KiB of the endpoint's answer; and the first 4 KiB of the body the
-- latest attempt sent. Written by the dispatcher in the statement that records the
-- outcome; nothing else writes them.
ALTER TABLE webhook_deliveries
    ADD COLUMN attempt_log JSONB NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN last_request TEXT;
