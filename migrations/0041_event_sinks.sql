-- Event sinks (issue #39): an instance's events streamed into a message broker, RabbitMQ
-- first. A sink reads the events stream (JetStream, in the order the relay published)
-- from its cursor, publishes with publisher confirms, and moves the cursor only after
-- the broker confirmed: at least once, in order, and a broker down or restarted loses
-- nothing (the stream keeps 7 days).
-- Generations come from one sequence, so a sink removed and made again never shares one
-- with its former self (a pod still delivering the old one then moves nothing).
CREATE SEQUENCE event_sink_generation;

CREATE TABLE event_sinks (
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('rabbitmq')),
    enabled          BOOLEAN NOT NULL DEFAULT true,
    -- The broker's AMQP URI with its credentials, sealed (bound to "rabbitmq:<instance
    -- id>"); NULL: the deployment's broker (`rabbitmq.url`).
    url_sealed       BYTEA,
    -- Where the URI points, without credentials, to show.
    url_shown        TEXT,
    -- Set by the admin only: the broker may be on a private address, at this host.
    private_host     TEXT,
    exchange         TEXT NOT NULL,
    -- Declared durable and bound to the instance's events, so nothing is dropped while
    -- no consumer is there; NULL: none (the consumers bind their own).
    queue            TEXT,
    -- Our event types (empty: all).
    events           TEXT[] NOT NULL DEFAULT '{}',
    format           webhook_format NOT NULL DEFAULT 'paceline',
    -- The Evolution event names `rabbitmq/set` was given (`events` holds ours).
    evolution_events TEXT[] NOT NULL DEFAULT '{}',
    -- The events stream's sequence up to which every event was published and confirmed
    -- (or not wanted).
    cursor_seq       BIGINT NOT NULL,
    -- Bumped by every change of the settings: a pod delivering under an older generation
    -- moves no cursor.
    generation       BIGINT NOT NULL DEFAULT nextval('event_sink_generation'),
    -- The dispatcher pod delivering the sink's events, until when.
    locked_by        TEXT,
    locked_until     TIMESTAMPTZ,
    delivered        BIGINT NOT NULL DEFAULT 0,
    last_delivered_at TIMESTAMPTZ,
    -- The last failure (the broker down, refusing), cleared by a delivery; since when it
    -- has been failing.
    last_error       TEXT,
    failing_since    TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, kind)
);
CREATE INDEX event_sinks_claim_idx ON event_sinks (locked_until) WHERE enabled;
