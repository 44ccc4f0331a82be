//! The event catalog: every event type paceline emits (or will, as its milestones land).
//! Webhook filters are checked against it.

/// Event types, dotted: `<resource>.<what happened>`.
pub const EVENT_TYPES: &[&str] = &[
    "message.queued",
    "message.sent",
    "message.failed",
    "message.delivered",
    "message.read",
    "message.received",
    "message.media_updated",
    "reaction.received",
    "instance.state",
    "instance.qr_updated",
    "instance.connected",
    "instance.logged_out",
    "instance.banned",
    "chat.updated",
    "contact.updated",
    "label.updated",
    "call.rejected",
    "webhook.disabled",
];

/// Whether `t` is a known type.
pub fn known(t: &str) -> bool {
    EVENT_TYPES.contains(&t)
}
