//! The account's own settings on the WhatsApp network: labels, privacy, profile,
//! picture and status posts.

use super::*;
use shared::contract::{OwnProfile, Posted, PrivacySettings};

/// The account's privacy settings, by category.
pub fn privacy(p: &whatsapp_rust::wacore::iq::privacy::PrivacySettingsResponse) -> PrivacySettings {
    p.settings.iter().map(|s| (s.category.as_str().to_string(), s.value.as_str().to_string())).collect()
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

pub(super) async fn labels(c: &Client, op: &LabelOp) -> Result<Answer, DriverError> {
    let l = c.labels();
    let refused = |_| failed("change the labels");
    match op {
        LabelOp::SetLabel(o) => {
            l.create_label(&o.label_id, &o.name, o.color).await.map_err(refused)?;
            Ok(o.answer(()))
        }
        LabelOp::DeleteLabel(o) => {
            l.delete_label(&o.label_id).await.map_err(refused)?;
            Ok(o.answer(()))
        }
        LabelOp::LabelChat(o) => {
            let j = jid(o.jid.as_str())?;
            if o.labeled {
                l.add_chat_label(&o.label_id, &j).await
            } else {
                l.remove_chat_label(&o.label_id, &j).await
            }
            .map_err(refused)?;
            Ok(o.answer(()))
        }
        LabelOp::LabelMessage(o) => {
            // whatsapp-rust has no method for it: the action is ours (map::LABEL_MESSAGE),
            // sent through the crate's own app-state encoder.
            let chat = jid(o.jid.as_str())?.to_string();
            let value = map::label_association(o.labeled, chrono::Utc::now().timestamp_millis());
            c.send_app_state_action(&map::LABEL_MESSAGE, &[&o.label_id, &chat, &o.wa_message_id], &value)
                .await
                .map_err(refused)?;
            Ok(o.answer(()))
        }
    }
}

pub(super) async fn account(c: &Client, op: &AccountOp) -> Result<Answer, DriverError> {
    let fetch_privacy = || async { c.fetch_privacy_settings().await.map_err(|e| iq_error(&e, "privacy")) };
    match op {
        AccountOp::Profile(o) => {
            let own = c.pn().ok_or_else(|| failed("give the profile before pairing"))?;
            let info = c.contacts().get_user_info(std::slice::from_ref(&own)).await.ok();
            let about = info.as_ref().and_then(|i| i.values().next()).and_then(|u| u.status.clone());
            let picture = c.contacts().get_profile_picture(&own, false).await.ok().flatten().map(|p| p.url);
            Ok(o.answer(OwnProfile { push_name: Some(c.push_name()), about, picture_url: picture }))
        }
        AccountOp::Privacy(o) => Ok(o.answer(privacy(&fetch_privacy().await?))),
        AccountOp::SetPrivacy(o) => {
            let (cat, val) = privacy_setting(&o.category, &o.value)?;
            c.set_privacy_setting(cat, val).await.map_err(|e| iq_error(&e, "privacy"))?;
            Ok(o.answer(privacy(&fetch_privacy().await?)))
        }
        AccountOp::SetProfile(o) => {
            let p = c.profile();
            if let Some(a) = &o.about {
                p.set_status_text(a).await.map_err(|_| failed("set the about text"))?;
            }
            if let Some(n) = &o.push_name {
                p.set_push_name(n).await.map_err(|_| failed("set the push name"))?;
            }
            Ok(o.answer(()))
        }
        AccountOp::SetPicture(o) => {
            let p = c.profile();
            match o.picture.as_ref().map(|pic| pic.bytes()) {
                Some(Some(bytes)) => p.set_profile_picture(bytes).await.map(drop),
                Some(None) => return Err(DriverError::new(ErrorCode::ValidationFailed, "the picture is not base64")),
                None => p.remove_profile_picture().await.map(drop),
            }
            .map_err(|_| failed("set the profile picture"))?;
            Ok(o.answer(()))
        }
        AccountOp::SetPresence(o) => {
            if o.available { c.presence().set_available().await } else { c.presence().set_unavailable().await }
                .map_err(|_| failed("set the presence"))?;
            Ok(o.answer(()))
        }
        AccountOp::PostStatus(o) => {
            if o.recipients.is_empty() {
                return Err(DriverError::new(ErrorCode::ValidationFailed, "a status needs at least one recipient"));
            }
            let font = whatsapp_rust::waproto::whatsapp::message::extended_text_message::FontType::default();
            let sent = c
                .status()
                .send_text(
                    &o.text,
                    o.background_argb.unwrap_or(0xFF1E_6E4F),
                    font,
                    &jids(&o.recipients)?,
                    Default::default(),
                )
                .await
                .map_err(|_| failed("post the status"))?;
            Ok(o.answer(Posted { wa_message_id: sent.message_id }))
        }
    }
}
