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
    "channel.updated",
    "call.rejected",
    "attendant.replied",
    "attendant.handoff",
    "attendant.failed",
    "webhook.disabled",
];

/// Whether `t` is a known type.
pub fn known(t: &str) -> bool {
    EVENT_TYPES.contains(&t)
}

/// The group, community and channel events: a driver passes these on from the network,
/// nothing else.
pub const NETWORK_EVENTS: [&str; 6] = [
    "group.updated",
    "group.participants_updated",
    "group.joined",
    "group.left",
    "community.groups_updated",
    "channel.updated",
];

/// `t` as one of the network's events, if it is one.
pub fn network_event(t: &str) -> Option<&'static str> {
    NETWORK_EVENTS.into_iter().find(|g| *g == t)
}

#[cfg(test)]
mod tests {
    #[test]
    fn network_events_are_in_the_catalog() {
        for g in super::NETWORK_EVENTS {
            assert!(super::known(g), "{g} is not in EVENT_TYPES");
        }
    }
}
