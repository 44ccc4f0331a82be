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
    "instance.risk",
    "instance.paused",
    "instance.resumed",
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

/// `t` as one of the events a driver passes on from the network (the group, community
/// and channel events of the catalog), if it is one; nothing else a network says is.
pub fn network_event(t: &str) -> Option<&'static str> {
    let relayed = |e: &&str| e.starts_with("group.") || e.starts_with("community.") || *e == "channel.updated";
    EVENT_TYPES.iter().copied().filter(relayed).find(|e| *e == t)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_group_community_and_channel_events_pass_from_the_network() {
        for e in ["group.updated", "group.left", "community.groups_updated", "channel.updated"] {
            assert_eq!(super::network_event(e), Some(e));
        }
        for e in ["message.received", "channel.post_received", "webhook.disabled", "group.nope"] {
            assert_eq!(super::network_event(e), None, "{e}");
        }
    }
}
