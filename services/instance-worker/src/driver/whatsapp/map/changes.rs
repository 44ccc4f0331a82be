//! Edits and deletions for everyone: protocol messages naming another message.

use super::*;

/// An edit or a deletion for everyone, if `m` is one: the network id of the message it
/// names, and an edit's new text (or caption).
pub fn change(m: &wa::Message) -> Option<(String, Option<String>)> {
    use wa::message::protocol_message::Type;
    let p = m.protocol_message.as_option()?;
    let target = p.key.as_option()?.id.clone().filter(|t| !t.is_empty())?;
    match p.r#type? {
        Type::REVOKE => Some((target, None)),
        Type::MESSAGE_EDIT => {
            let (_, content, _) = incoming_content(p.edited_message.as_option()?);
            let text = content.get("text").or_else(|| content.get("caption")).and_then(|t| t.as_str())?;
            Some((target, Some(text.to_string())))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_and_deletions_name_their_message() {
        use wa::message::protocol_message::Type;
        let key = || MessageField::some(wa::MessageKey { id: Some("3EB0TARGET".into()), ..Default::default() });
        let revoke = wa::Message {
            protocol_message: MessageField::some(wa::message::ProtocolMessage {
                key: key(),
                r#type: Some(Type::REVOKE),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(change(&revoke), Some(("3EB0TARGET".into(), None)));
        let edit = wa::Message {
            protocol_message: MessageField::some(wa::message::ProtocolMessage {
                key: key(),
                r#type: Some(Type::MESSAGE_EDIT),
                edited_message: MessageField::some(wa::Message {
                    conversation: Some("fixed typo".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(change(&edit), Some(("3EB0TARGET".into(), Some("fixed typo".into()))));
        let other = wa::Message {
            protocol_message: MessageField::some(wa::message::ProtocolMessage {
                key: key(),
                r#type: Some(Type::EPHEMERAL_SETTING),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(change(&other), None);
    }
}
