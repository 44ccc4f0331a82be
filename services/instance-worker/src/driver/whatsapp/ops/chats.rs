//! Chats and contacts on the WhatsApp network.

use super::*;

pub(super) async fn chats(c: &Client, op: &ChatOp) -> Result<Answer, DriverError> {
    let actions = c.chat_actions();
    match op {
        ChatOp::ReadChat(o) => {
            actions
                .mark_chat_as_read(&jid(o.jid.as_str())?, o.read, None)
                .await
                .map_err(|_| failed("mark the chat"))?;
            Ok(o.answer(()))
        }
        ChatOp::ModifyChat(o) => {
            let j = jid(o.jid.as_str())?;
            match o.archived {
                Some(true) => actions.archive_chat(&j, None).await,
                Some(false) => actions.unarchive_chat(&j, None).await,
                None => Ok(()),
            }
            .map_err(|_| failed("archive the chat"))?;
            match o.pinned {
                Some(true) => actions.pin_chat(&j).await,
                Some(false) => actions.unpin_chat(&j).await,
                None => Ok(()),
            }
            .map_err(|_| failed("pin the chat"))?;
            match o.muted_until {
                Some(Some(t)) => actions.mute_chat_until(&j, t.timestamp_millis()).await,
                Some(None) => actions.unmute_chat(&j).await,
                None => Ok(()),
            }
            .map_err(|_| failed("mute the chat"))?;
            Ok(o.answer(()))
        }
        ChatOp::DeleteChat(o) => {
            actions.delete_chat(&jid(o.jid.as_str())?, true, None).await.map_err(|_| failed("delete the chat"))?;
            Ok(o.answer(()))
        }
        ChatOp::ChatPresence(o) => {
            use whatsapp_rust::features::ChatStateType;
            let state = if o.composing { ChatStateType::Composing } else { ChatStateType::Paused };
            c.chatstate().send(&jid(o.jid.as_str())?, state).await.map_err(|_| failed("send the typing indicator"))?;
            Ok(o.answer(()))
        }
        ChatOp::RevokeMessage(o) => {
            c.revoke_message(jid(o.jid.as_str())?, o.wa_message_id.clone(), whatsapp_rust::RevokeType::Sender)
                .await
                .map_err(|_| failed("delete the message"))?;
            Ok(o.answer(()))
        }
        ChatOp::EditMessage(o) => {
            let m =
                whatsapp_rust::waproto::whatsapp::Message { conversation: Some(o.text.clone()), ..Default::default() };
            c.edit_message(jid(o.jid.as_str())?, o.wa_message_id.clone(), m)
                .await
                .map_err(|_| failed("edit the message"))?;
            Ok(o.answer(()))
        }
    }
}

pub(super) async fn contacts(c: &Client, book: Book<'_>, op: &ContactOp) -> Result<Answer, DriverError> {
    match op {
        ContactOp::Contacts(o) => {
            let list = book::list(book.db, book.instance)
                .await
                .map_err(|_| DriverError::new(ErrorCode::Internal, "reading the contact book failed"))?;
            Ok(o.answer(list))
        }
        ContactOp::Contact(o) => {
            let j = jid(o.jid.as_str())?;
            let found = c
                .contacts()
                .is_on_whatsapp(std::slice::from_ref(&j))
                .await
                .map_err(|_| failed("look the contact up"))?;
            let known =
                book::get(book.db, book.instance, &j.to_non_ad_string()).await.ok().flatten().unwrap_or_default();
            let r = found
                .into_iter()
                .find(|r| r.is_registered)
                .ok_or_else(|| DriverError::new(ErrorCode::NotFound, "no account has this number"))?;
            let mut info = known.info(ours_or_fail(&r.jid, "contact")?.as_str()).expect("a JID of ours");
            info.business = Some(r.is_business);
            Ok(o.answer(info))
        }
        ContactOp::ContactPicture(o) => {
            let pic = c
                .contacts()
                .get_profile_picture(&jid(o.jid.as_str())?, false)
                .await
                .map_err(|_| failed("give the picture"))?;
            Ok(o.answer(shared::contract::PictureUrl { url: pic.map(|p| p.url) }))
        }
        ContactOp::ContactProfile(o) => {
            let j = jid(o.jid.as_str())?;
            let info =
                c.contacts().get_user_info(std::slice::from_ref(&j)).await.map_err(|_| failed("give the profile"))?;
            let about = info.values().next().and_then(|u| u.status.clone());
            let business = c.get_business_profile(&j).await.ok().flatten().map(|b| map::business_profile(&b));
            Ok(o.answer(shared::contract::ContactDetails { jid: o.jid.clone(), about, business_profile: business }))
        }
        ContactOp::Block(o) => {
            let j = jid(o.jid.as_str())?;
            if o.blocked { c.blocking().block(&j).await } else { c.blocking().unblock(&j).await }
                .map_err(|_| failed("change the block list"))?;
            Ok(o.answer(()))
        }
        ContactOp::Blocklist(o) => {
            let list = c.blocking().get_blocklist().await.map_err(|_| failed("read the block list"))?;
            Ok(o.answer(list.iter().filter_map(|e| ours(&e.jid)).collect()))
        }
    }
}
