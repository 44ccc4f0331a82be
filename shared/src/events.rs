//! The event catalog: every event paceline emits, typed. [`Event`] is one variant per
//! type (tagged `type`, its payload `data`, the types of [`data`]); the outbox takes an
//! `&Event`, webhook filters are checked against [`EVENT_TYPES`], and the OpenAPI
//! description documents each type with its payload's schema (`domain::catalog`).

pub mod data;

use serde::{Deserialize, Serialize};

pub use crate::db::messages::MessageOut;
pub use data::*;

macro_rules! events {
    ($($kind:literal => $variant:ident($data:ident),)*) => {
        /// An event: its type and its payload.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type", content = "data")]
        pub enum Event {
            $(#[serde(rename = $kind)] $variant($data),)*
        }

        /// Event types, dotted: `<resource>.<what happened>`.
        pub const EVENT_TYPES: &[&str] = &[$($kind,)*];

        impl Event {
            /// Its type, e.g. `message.sent`.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Event::$variant(_) => $kind,)*
                }
            }

            /// Its payload as JSON (what `data` carries).
            pub fn data(&self) -> serde_json::Value {
                let data = match self {
                    $(Event::$variant(d) => serde_json::to_value(d),)*
                };
                data.expect("an event's payload serializes")
            }

            /// The name of its payload's schema in the OpenAPI description.
            pub fn schema_of(kind: &str) -> Option<&'static str> {
                match kind {
                    $($kind => Some(stringify!($data)),)*
                    _ => None,
                }
            }
        }
    };
}

events! {
    "message.queued" => MessageQueued(MessageOut),
    "message.sent" => MessageSent(MessageOut),
    "message.failed" => MessageFailed(MessageOut),
    "message.delivered" => MessageDelivered(ReceiptEventData),
    "message.read" => MessageRead(ReceiptEventData),
    "message.received" => MessageReceived(ReceivedMessageEventData),
    "message.media_updated" => MediaUpdated(MediaUpdatedEventData),
    "message.edited" => MessageEdited(MessageEditedEventData),
    "message.deleted" => MessageDeleted(MessageDeletedEventData),
    "reaction.received" => ReactionReceived(ReactionEventData),
    "status.received" => StatusReceived(ReceivedMessageEventData),
    "channel.post_received" => ChannelPostReceived(ReceivedMessageEventData),
    "instance.created" => InstanceCreated(InstanceLifecycleEventData),
    "instance.deleted" => InstanceDeleted(InstanceLifecycleEventData),
    "instance.state" => InstanceState(InstanceStateEventData),
    "instance.qr_updated" => QrUpdated(QrUpdatedEventData),
    "instance.connected" => Connected(ConnectedEventData),
    "instance.logged_out" => LoggedOut(EmptyEventData),
    "instance.banned" => Banned(EmptyEventData),
    "instance.risk" => Risk(InstanceRiskEventData),
    "instance.paused" => Paused(InstancePausedEventData),
    "instance.resumed" => Resumed(InstanceResumedEventData),
    "chat.updated" => ChatUpdated(ChatUpdatedEventData),
    "contact.updated" => ContactUpdated(ContactUpdatedEventData),
    "label.updated" => LabelUpdated(LabelUpdatedEventData),
    "group.updated" => GroupUpdated(GroupUpdatedEventData),
    "group.participants_updated" => GroupParticipants(GroupParticipantsEventData),
    "group.joined" => GroupJoined(GroupMembershipEventData),
    "group.left" => GroupLeft(GroupMembershipEventData),
    "community.groups_updated" => CommunityGroups(CommunityGroupsEventData),
    "channel.updated" => ChannelUpdated(ChannelUpdatedEventData),
    "call.rejected" => CallRejected(CallRejectedEventData),
    "attendant.replied" => AttendantReplied(AttendantRepliedEventData),
    "attendant.handoff" => AttendantHandoff(AttendantHandoffEventData),
    "attendant.failed" => AttendantFailed(AttendantFailedEventData),
    "webhook.disabled" => WebhookDisabled(WebhookDisabledEventData),
}

impl Event {
    /// An event of type `kind` with payload `data`, if `data` is that type's payload
    /// (what a driver passes on from the network is read here, and nothing else is
    /// emitted).
    pub fn parse(kind: &str, data: serde_json::Value) -> Result<Event, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "type": kind, "data": data }))
    }
}

/// Whether `t` is a known type.
pub fn known(t: &str) -> bool {
    EVENT_TYPES.contains(&t)
}

/// The event a driver passes on from the network, if `kind` is one of those (the group,
/// community and channel events of the catalog) and `data` is its payload; nothing else
/// a network says is (an ill-shaped payload is logged and dropped).
pub fn network_event(kind: &str, data: serde_json::Value) -> Option<Event> {
    let relayed = kind.starts_with("group.") || kind.starts_with("community.") || kind == "channel.updated";
    if !relayed || !known(kind) {
        return None;
    }
    match Event::parse(kind, data) {
        Ok(event) => Some(event),
        Err(e) => {
            tracing::warn!(kind, error = %e, "a network event not of its type's shape was dropped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_group_community_and_channel_events_pass_from_the_network() {
        use serde_json::json;
        let group = json!({ "jid": "g", "by": null, "subject": "s" });
        let ok = [
            ("group.updated", group.clone()),
            ("group.left", group.clone()),
            ("community.groups_updated", json!({ "jid": "c", "action": "linked", "groups": ["g"] })),
            ("channel.updated", json!({ "jid": "n", "name": "News", "description": null })),
        ];
        for (kind, data) in ok {
            assert_eq!(super::network_event(kind, data).map(|e| e.kind()), Some(kind));
        }
        for kind in ["message.received", "channel.post_received", "webhook.disabled", "group.nope"] {
            assert!(super::network_event(kind, group.clone()).is_none(), "{kind}");
        }
        assert!(super::network_event("group.left", json!({ "jid": "g" })).is_none(), "no subject: not its shape");
    }

    /// Every type has one variant, and its payload round-trips as emitted.
    #[test]
    fn types_are_unique_and_payloads_round_trip() {
        let mut types = super::EVENT_TYPES.to_vec();
        types.sort();
        types.dedup();
        assert_eq!(types.len(), super::EVENT_TYPES.len());
        let e = super::Event::parse("instance.resumed", serde_json::json!({ "paused_for": "risk_critical" })).unwrap();
        assert_eq!(e.kind(), "instance.resumed");
        assert_eq!(e.data(), serde_json::json!({ "paused_for": "risk_critical" }));
        assert!(super::Event::parse("instance.resumed", serde_json::json!({})).is_err());
        for t in super::EVENT_TYPES {
            assert!(super::Event::schema_of(t).is_some(), "{t}");
        }
    }
}
