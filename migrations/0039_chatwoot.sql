-- Chatwoot inboxes (issue #37): one per instance, kept in step by the `chatwoot` role.
-- Everything the bridge must do is a job row first (chatwoot_jobs), done in order per
-- instance with backoff, so Chatwoot down or slow loses nothing; what it made in Chatwoot
-- is recorded (chatwoot_chats, chatwoot_messages), so nothing is made twice.
CREATE TABLE chatwoot_inboxes (
    instance_id     TEXT PRIMARY KEY REFERENCES instances (id) ON DELETE CASCADE,
    -- The settings as the API took them, without the access token.
    config          JSONB NOT NULL,
    -- Chatwoot's access token, sealed (AES-256-GCM, bound to "chatwoot:<instance id>").
    token_sealed    BYTEA NOT NULL,
    -- The inbox in Chatwoot: given, or created by the bridge (then NULL until it is).
    inbox_id        BIGINT,
    -- The secret in the URL Chatwoot posts its webhooks to: its SHA-256 finds the inbox,
    -- and it is kept sealed (bound to "chatwoot-hook:<instance id>") to be shown again.
    hook_hash       TEXT NOT NULL UNIQUE,
    hook_sealed     BYTEA NOT NULL,
    -- Set by the admin only: Chatwoot may be on a private address, at this origin.
    private_origin  TEXT,
    -- Bumped when the Chatwoot account or inbox changes: the chats and messages mapped
    -- under another generation belong to the old inbox.
    generation      BIGINT NOT NULL DEFAULT 1,
    -- The bridge's last failure talking to Chatwoot, cleared by a success.
    last_error      TEXT,
    -- Made from this account's settings (chatwoot_accounts), not the instance's own:
    -- changed with them, and removed when the instance leaves the account.
    from_account    TEXT,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- An account's Chatwoot settings: every instance of the account without settings of its
-- own gets an inbox of its own made from them (named after the instance).
CREATE TABLE chatwoot_accounts (
    account_id      TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    config          JSONB NOT NULL,
    -- Sealed, bound to "chatwoot-account:<account id>".
    token_sealed    BYTEA NOT NULL,
    private_origin  TEXT,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A chat's contact and conversation in the inbox.
CREATE TABLE chatwoot_chats (
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    chat_jid         TEXT NOT NULL,
    generation       BIGINT NOT NULL,
    contact_id       BIGINT NOT NULL,
    conversation_id  BIGINT,
    PRIMARY KEY (instance_id, chat_jid)
);
CREATE INDEX chatwoot_chats_conversation_idx ON chatwoot_chats (instance_id, conversation_id);

-- A message of ours (msg_..., or a network id) and its copy in Chatwoot.
CREATE TABLE chatwoot_messages (
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    message_key      TEXT NOT NULL,
    generation       BIGINT NOT NULL,
    conversation_id  BIGINT NOT NULL,
    cw_message_id    BIGINT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, message_key)
);
CREATE INDEX chatwoot_messages_cw_idx ON chatwoot_messages (instance_id, cw_message_id);

-- The bridge's work: `setup` (find or make the inbox), `inbound` (a message or reaction
-- into Chatwoot), `outbound` (an agent's message to WhatsApp), `status` (a send's failure
-- back to Chatwoot), `resolved` (a conversation closed in Chatwoot), `import` (queue the
-- local log's chats and recent messages), `contact` (one imported contact). `key` is what caused
-- it (an event, Chatwoot's message id), so the same cause queues it once. An instance's
-- jobs are done one at a time: its setup first, then an import, then by `event_at` (when
-- what caused it happened), then `seq`.
CREATE TABLE chatwoot_jobs (
    seq              BIGSERIAL PRIMARY KEY,
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('setup', 'inbound', 'outbound', 'status', 'resolved', 'import', 'contact')),
    key              TEXT NOT NULL,
    payload          JSONB NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    attempts         INT NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    event_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The first try: a job is given up `chatwoot.retry_span_ms` after it, not after it
    -- was queued (work waiting behind a long outage is not discarded unseen).
    first_try_at     TIMESTAMPTZ,
    locked_by        TEXT,
    locked_until     TIMESTAMPTZ,
    claim_id         TEXT,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (instance_id, kind, key)
);
CREATE INDEX chatwoot_jobs_pending_idx ON chatwoot_jobs (instance_id, event_at, seq) WHERE state = 'pending';
CREATE INDEX chatwoot_jobs_finished_idx ON chatwoot_jobs (updated_at) WHERE state <> 'pending';
