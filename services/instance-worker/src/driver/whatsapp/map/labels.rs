//! Labels between devices: label edits and chat labels from app state as our events,
//! and the app-state values we write for them.

use super::*;

/// A label created, edited or deleted on another device (app state `label_edit`).
pub fn label_edit(l: &LabelEditUpdate) -> DriverEvent {
    DriverEvent::Label {
        label_id: l.label_id.clone(),
        name: l.action.name.clone().unwrap_or_default(),
        color: l.action.color.unwrap_or(0),
        deleted: l.action.deleted.unwrap_or(false),
    }
}

/// A label applied to or removed from a chat on another device (app state
/// `label_jid`); absent `labeled` means removed.
pub fn label_target(l: &LabelAssociationUpdate) -> DriverEvent {
    DriverEvent::LabelTarget {
        label_id: l.label_id.clone(),
        jid: l.chat_jid.to_string(),
        wa_message_id: None,
        labeled: l.action.labeled.unwrap_or(false),
    }
}

/// The app-state action that puts a label on one message or takes it off
/// (`label_message`). whatsapp-rust 0.7's registry (generated from WhatsApp Web)
/// has no such action, so it is declared here as Baileys (`chatModificationToAppPatch`)
/// and whatsmeow (`appstate.BuildLabelMessage`) encode it: collection `regular`,
/// version 3, index `["label_message", labelId, chatJid, messageId, "0", "0"]`.
pub const LABEL_MESSAGE: schemas::Schema = schemas::Schema {
    key: "LabelMessage",
    name: "label_message",
    module: "WAWebLabelMessageSync",
    collection: schemas::Collection::Regular,
    version: 3,
    scope: schemas::Scope::Message,
    value_field: Some("labelAssociationAction"),
    value_proto_type: Some("SyncActionValue.LabelAssociationAction"),
    value_enum_fields: &[],
    chat_jid_index: Some(2),
    index_parts: &[
        schemas::IndexPart::Literal { value: "label_message" },
        schemas::IndexPart::StringPart { name: "labelId" },
        schemas::IndexPart::Jid { name: "chatJid" },
        schemas::IndexPart::StringPart { name: "messageId" },
        schemas::IndexPart::Literal { value: "0" },
        schemas::IndexPart::Literal { value: "0" },
    ],
};

/// The value of a `label_jid` or `label_message` mutation: labelled or not, now.
pub fn label_association(labeled: bool, now_ms: i64) -> wa::SyncActionValue {
    wa::SyncActionValue {
        label_association_action: MessageField::some(wa::sync_action_value::LabelAssociationAction {
            labeled: Some(labeled),
            ..Default::default()
        }),
        timestamp: Some(now_ms),
        ..Default::default()
    }
}
