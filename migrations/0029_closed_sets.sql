-- The closed sets the code reads as enums (`MessageType` for messages.type,
-- `log::Source` and `log::LogStatus` for log_messages.source and .status) are closed
-- in the database too. They stay text with a CHECK rather than becoming Postgres enums:
-- changing a column's type rewrites the two largest tables under an exclusive lock, and
-- the release before binds these values as text, which an enum column refuses during a
-- rolling upgrade. A new member is a new migration that widens the CHECK first.
-- (log_messages.type stays open: a driver logs what the network sent, `unsupported`
-- included.)
ALTER TABLE messages ADD CONSTRAINT messages_type_check CHECK (type IN
    ('text', 'image', 'video', 'audio', 'voice', 'document', 'sticker', 'location', 'contact', 'poll', 'reaction'))
    NOT VALID;
ALTER TABLE messages VALIDATE CONSTRAINT messages_type_check;

ALTER TABLE log_messages ADD CONSTRAINT log_messages_source_check CHECK (source IN ('live', 'history', 'queue'));
ALTER TABLE log_messages ADD CONSTRAINT log_messages_status_check CHECK (status IN ('sent', 'delivered', 'read'));
