//! The account's own settings on the WhatsApp network: labels, privacy, profile,
//! picture and status posts.

use super::*;

/// `{category: value}` of the account's privacy settings.
pub fn privacy_json(p: &whatsapp_rust::wacore::iq::privacy::PrivacySettingsResponse) -> Value {
    Value::Object(p.settings.iter().map(|s| (s.category.as_str().to_string(), json!(s.value.as_str()))).collect())
}

/// A privacy setting by its network names, refused when the value does not fit the
/// category (e.g. `online` is `all` or `match_last_seen`).
pub fn privacy_setting(
    category: &str,
    value: &str,
) -> Result<
    (whatsapp_rust::wacore::iq::privacy::PrivacyCategory, whatsapp_rust::wacore::iq::privacy::PrivacyValue),
    DriverError,
> {
    use whatsapp_rust::wacore::iq::privacy::{PrivacyCategory, PrivacyValue};
    let c = PrivacyCategory::from(category);
    let v = PrivacyValue::from(value);
    let bad = |what: &str| DriverError::new(ErrorCode::ValidationFailed, what.to_string());
    if matches!(c, PrivacyCategory::Other(_)) {
        return Err(bad(
            "unknown privacy category (last, online, profile, status, groupadd, readreceipts, calladd, messages)",
        ));
    }
    if matches!(v, PrivacyValue::Other(_)) || !c.is_valid_value(&v) {
        return Err(bad("this value does not fit the privacy category"));
    }
    Ok((c, v))
}

pub(super) async fn labels(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    let l = c.labels();
    let refused = |_| failed("change the labels");
    match op {
        NetOp::SetLabel { label_id, name, color } => l.create_label(label_id, name, *color).await.map_err(refused)?,
        NetOp::DeleteLabel { label_id } => l.delete_label(label_id).await.map_err(refused)?,
        NetOp::LabelChat { label_id, jid: j, labeled: true } => {
            l.add_chat_label(label_id, &jid(j)?).await.map_err(refused)?
        }
        NetOp::LabelChat { label_id, jid: j, labeled: false } => {
            l.remove_chat_label(label_id, &jid(j)?).await.map_err(refused)?
        }
        NetOp::LabelMessage { label_id, jid: j, wa_message_id, labeled } => {
            // whatsapp-rust has no method for it: the action is ours (map::LABEL_MESSAGE),
            // sent through the crate's own app-state encoder.
            let chat = jid(j)?.to_string();
            let value = map::label_association(*labeled, chrono::Utc::now().timestamp_millis());
            c.send_app_state_action(&map::LABEL_MESSAGE, &[label_id, &chat, wa_message_id], &value)
                .await
                .map_err(refused)?
        }
        _ => unreachable!("routed by run()"),
    }
    Ok(Value::Null)
}

pub(super) async fn account(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    match op {
        NetOp::Privacy => Ok(privacy_json(&c.fetch_privacy_settings().await.map_err(|e| iq_error(&e, "privacy"))?)),
        NetOp::SetPrivacy { category, value } => {
            let (cat, val) = privacy_setting(category, value)?;
            c.set_privacy_setting(cat, val).await.map_err(|e| iq_error(&e, "privacy"))?;
            Ok(privacy_json(&c.fetch_privacy_settings().await.map_err(|e| iq_error(&e, "privacy"))?))
        }
        NetOp::SetProfile { about, push_name } => {
            let p = c.profile();
            if let Some(a) = about {
                p.set_status_text(a).await.map_err(|_| failed("set the about text"))?;
            }
            if let Some(n) = push_name {
                p.set_push_name(n).await.map_err(|_| failed("set the push name"))?;
            }
            Ok(Value::Null)
        }
        NetOp::SetPicture { picture } => {
            let p = c.profile();
            match picture.as_ref().map(|pic| pic.bytes()) {
                Some(Some(bytes)) => p.set_profile_picture(bytes).await.map(drop),
                Some(None) => return Err(DriverError::new(ErrorCode::ValidationFailed, "the picture is not base64")),
                None => p.remove_profile_picture().await.map(drop),
            }
            .map_err(|_| failed("set the profile picture"))?;
            Ok(Value::Null)
        }
        NetOp::PostStatus { text, background_argb, recipients } => {
            if recipients.is_empty() {
                return Err(DriverError::new(ErrorCode::ValidationFailed, "a status needs at least one recipient"));
            }
            let font = whatsapp_rust::waproto::whatsapp::message::extended_text_message::FontType::default();
            let sent = c
                .status()
                .send_text(text, background_argb.unwrap_or(0xFF1E_6E4F), font, &jids(recipients)?, Default::default())
                .await
                .map_err(|_| failed("post the status"))?;
            Ok(json!({ "wa_message_id": sent.message_id }))
        }
        _ => unreachable!("routed by run()"),
    }
}
