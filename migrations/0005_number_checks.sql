-- Numbers an instance already looked up: asking again is not a new lookup (quotas).
CREATE TABLE number_checks (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    number       TEXT NOT NULL,
    exists       BOOLEAN NOT NULL,
    jid          TEXT,
    checked_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, number)
);
