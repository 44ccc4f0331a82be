-- Hidden ids (LIDs): the network may address a person by `<id>@lid` instead of their
-- number. What an instance's session learned of a LID's phone-number JID, so a chat
-- reached by both stays one chat (keyed by the number) and every event, chat and
-- Chatwoot contact shows the number beside the LID. Written by the worker that owns
-- the instance (fenced), read by the API.
CREATE TABLE lid_map (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    -- `<id>@lid`
    lid          TEXT NOT NULL,
    -- `<number>@s.whatsapp.net`
    pn           TEXT NOT NULL,
    learned_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, lid)
);

-- A chat's hidden id, when the network addressed its party by one (the chat is keyed by
-- the number once it is known, by the LID until then).
ALTER TABLE chats ADD COLUMN lid TEXT;
