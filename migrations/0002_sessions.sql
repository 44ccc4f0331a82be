-- What workers need to run instances: whether a session should run, the session's
-- credentials (so any worker resumes it without pairing again), the QR code on show,
-- and which worker holds it. Credentials are secret: the API never selects them.
ALTER TABLE instances
    ADD COLUMN desired BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN session JSONB,
    ADD COLUMN network TEXT,
    ADD COLUMN qr_code TEXT,
    ADD COLUMN qr_expires_at TIMESTAMPTZ,
    ADD COLUMN owner_worker TEXT,
    ADD COLUMN state_changed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    ADD CONSTRAINT instances_network_check CHECK (network IN ('sim', 'whatsapp'));

-- The workers' scan: instances that should run.
CREATE INDEX instances_desired_idx ON instances (id) WHERE desired;
