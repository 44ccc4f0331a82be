//! Pictures (the account's and groups'): checked, stored only for the change, handed
//! to the worker by id (never on the bus), then deleted. The account's profile route and
//! Evolution's `updateProfilePicture` and `updateGroupPicture` set them here.

use shared::bus::RpcRequest;
use shared::contract::Picture;
use shared::db::media;
use shared::ids::InstanceId;
use shared::message::MessageType;

use crate::message_in::{media_source, MediaIn, MediaSource};
use crate::send::store_media;
use crate::{Core, Error, Result};

/// Sets the account's picture (`group` None) or a group's, from a JPEG's bytes or URL:
/// checked, stored, handed to the worker by id (never on the bus), then deleted.
pub async fn set(
    core: &Core,
    id: &InstanceId,
    media: MediaIn,
    holds_slot: bool,
    group: Option<shared::jid::Jid>,
) -> Result<()> {
    if media.mime_type.as_deref().is_some_and(|m| m != "image/jpeg") {
        return Err(Error::invalid("the picture must be a JPEG image (media.mime_type image/jpeg)"));
    }
    let src = media_source(media, MessageType::Image)?;
    if let MediaSource::Bytes { data, .. } = &src {
        check_picture(data)?;
    }
    // Nothing is fetched or stored for a session (or group) that could not take it.
    let ctx = crate::Ctx::new(core, id, crate::Caller::Owner);
    match &group {
        None => drop(crate::profile::get(ctx).await?),
        Some(jid) => drop(crate::groups::get(ctx, jid.clone()).await?),
    }
    let (media_id, desc) = store_media(core, id, MessageType::Image, src, holds_slot).await?;
    // A downloaded picture is checked like given bytes: its size, then that it is a JPEG.
    let checked = match desc["size"].as_u64() {
        Some(n) if n > Picture::LIMIT as u64 => {
            Err(Error::refused(shared::ErrorCode::MediaTooLarge, "the picture is over 5 MiB"))
        }
        _ => match core.media.head(&media_id, 3).await {
            Ok(first) => check_picture(&first),
            Err(e) => Err(crate::send::media_error(e)),
        },
    };
    if let Err(e) = checked {
        let _ = media::delete(&core.db, id, &media_id).await;
        return Err(e);
    }
    let set = crate::net::call(core, id, RpcRequest::SetPicture { media_id: Some(media_id.clone()), group }).await;
    let _ = media::delete(&core.db, id, &media_id).await;
    set.map(drop)
}

fn check_picture(data: &[u8]) -> Result<()> {
    match Picture::jpeg(data) {
        Err(why) if data.len() > Picture::LIMIT => Err(Error::refused(shared::ErrorCode::MediaTooLarge, why)),
        Err(why) => Err(Error::invalid(why)),
        Ok(_) => Ok(()),
    }
}
