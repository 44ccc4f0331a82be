-- Accounts: a hosting provider's customers as tenants. An account holds instances (an
-- instance belongs to at most one; existing instances stay without one), has tokens of
-- its own (stored as SHA-256, several at once so they can be rotated), quotas (NULL: no
-- limit) and a state: a suspended account's tokens may only read, and its instances'
-- queues hold (the worker reads the state with the instance's pacing).
CREATE TABLE accounts (
    id                    TEXT PRIMARY KEY,
    name                  TEXT NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    metadata              JSONB NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    state                 TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended')),
    quota_instances       INTEGER CHECK (quota_instances >= 0),
    quota_messages_per_day INTEGER CHECK (quota_messages_per_day >= 0),
    quota_media_bytes     BIGINT CHECK (quota_media_bytes >= 0),
    quota_lookups_per_day INTEGER CHECK (quota_lookups_per_day >= 0),
    quota_webhooks        INTEGER CHECK (quota_webhooks >= 0),
    suspended_at          TIMESTAMPTZ,
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at            TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE account_tokens (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name         TEXT NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at TIMESTAMPTZ
);
CREATE INDEX account_tokens_account_idx ON account_tokens (account_id, id);

-- An instance's account, and the UTC day it joined it (its usage from that day on is
-- the account's).
ALTER TABLE instances
    ADD COLUMN account_id TEXT REFERENCES accounts (id),
    ADD COLUMN account_since DATE;
CREATE INDEX instances_account_idx ON instances (account_id, id) WHERE account_id IS NOT NULL;

-- Usage an account keeps after an instance left it (deleted or moved to another
-- account): billed figures never vanish with the instance.
CREATE TABLE account_usage_retired (
    account_id            TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day                   DATE NOT NULL,
    messages_queued       BIGINT NOT NULL DEFAULT 0,
    messages_sent         BIGINT NOT NULL DEFAULT 0,
    messages_failed       BIGINT NOT NULL DEFAULT 0,
    messages_expired      BIGINT NOT NULL DEFAULT 0,
    messages_received     BIGINT NOT NULL DEFAULT 0,
    media_bytes_sent      BIGINT NOT NULL DEFAULT 0,
    media_bytes_received  BIGINT NOT NULL DEFAULT 0,
    lookups_new           BIGINT NOT NULL DEFAULT 0,
    lookups_cached        BIGINT NOT NULL DEFAULT 0,
    deliveries_succeeded  BIGINT NOT NULL DEFAULT 0,
    deliveries_failed     BIGINT NOT NULL DEFAULT 0,
    requests_admin        BIGINT NOT NULL DEFAULT 0,
    requests_instance     BIGINT NOT NULL DEFAULT 0,
    requests_api_key      BIGINT NOT NULL DEFAULT 0,
    requests_account      BIGINT NOT NULL DEFAULT 0,
    attendant_replies     BIGINT NOT NULL DEFAULT 0,
    attendant_tokens      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day)
);

-- Requests made with an account token, counted per instance like the other kinds.
ALTER TABLE usage_daily ADD COLUMN requests_account BIGINT NOT NULL DEFAULT 0;

-- Keeps an instance's usage of the days since..through with an account, added to what
-- it already kept (called before the instance leaves the account or is deleted).
CREATE FUNCTION account_usage_fold(inst TEXT, acct TEXT, since DATE, through DATE) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO account_usage_retired (account_id, day, messages_queued, messages_sent, messages_failed,
        messages_expired, messages_received, media_bytes_sent, media_bytes_received, lookups_new, lookups_cached,
        deliveries_succeeded, deliveries_failed, requests_admin, requests_instance, requests_api_key,
        requests_account, attendant_replies, attendant_tokens)
    SELECT acct, day, messages_queued, messages_sent, messages_failed, messages_expired, messages_received,
        media_bytes_sent, media_bytes_received, lookups_new, lookups_cached, deliveries_succeeded, deliveries_failed,
        requests_admin, requests_instance, requests_api_key, requests_account, attendant_replies, attendant_tokens
    FROM usage_daily WHERE instance_id = inst AND day BETWEEN since AND through
    ON CONFLICT (account_id, day) DO UPDATE SET
        messages_queued = account_usage_retired.messages_queued + EXCLUDED.messages_queued,
        messages_sent = account_usage_retired.messages_sent + EXCLUDED.messages_sent,
        messages_failed = account_usage_retired.messages_failed + EXCLUDED.messages_failed,
        messages_expired = account_usage_retired.messages_expired + EXCLUDED.messages_expired,
        messages_received = account_usage_retired.messages_received + EXCLUDED.messages_received,
        media_bytes_sent = account_usage_retired.media_bytes_sent + EXCLUDED.media_bytes_sent,
        media_bytes_received = account_usage_retired.media_bytes_received + EXCLUDED.media_bytes_received,
        lookups_new = account_usage_retired.lookups_new + EXCLUDED.lookups_new,
        lookups_cached = account_usage_retired.lookups_cached + EXCLUDED.lookups_cached,
        deliveries_succeeded = account_usage_retired.deliveries_succeeded + EXCLUDED.deliveries_succeeded,
        deliveries_failed = account_usage_retired.deliveries_failed + EXCLUDED.deliveries_failed,
        requests_admin = account_usage_retired.requests_admin + EXCLUDED.requests_admin,
        requests_instance = account_usage_retired.requests_instance + EXCLUDED.requests_instance,
        requests_api_key = account_usage_retired.requests_api_key + EXCLUDED.requests_api_key,
        requests_account = account_usage_retired.requests_account + EXCLUDED.requests_account,
        attendant_replies = account_usage_retired.attendant_replies + EXCLUDED.attendant_replies,
        attendant_tokens = account_usage_retired.attendant_tokens + EXCLUDED.attendant_tokens;
$$;
