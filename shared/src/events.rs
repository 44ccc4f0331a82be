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
    "status.received",
    "channel.post_received",
    "instance.state",
    "instance.qr_updated",
    "instance.connected",
    "instance.logged_out",
    "instance.banned",
    "chat.updated",
    "contact.updated",
    "label.updated",
    "group.updated",
    "group.participants_updated",
    "group.joined",
    "group.left",
    "community.groups_updated",
    "call.rejected",
    "webhook.disabled",
];

/// Whether `t` is a known type.
pub fn known(t: &str) -> bool {
    EVENT_TYPES.contains(&t)
}

/// The group and community events: a driver passes these on from the network, nothing
/// else.
pub const GROUP_EVENTS: [&str; 5] =
    ["group.updated", "group.participants_updated", "group.joined", "group.left", "community.groups_updated"];

/// `t` as one of the group events, if it is one.
pub fn group_event(t: &str) -> Option<&'static str> {
    GROUP_EVENTS.into_iter().find(|g| *g == t)
}

#[cfg(test)]
mod tests {
    #[test]
    fn group_events_are_in_the_catalog() {
        for g in super::GROUP_EVENTS {
            assert!(super::known(g), "{g} is not in EVENT_TYPES");
        }
    }
}
