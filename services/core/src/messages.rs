//! Changes to messages already sent: deleting one of the account's own for everyone,
//! and replacing the text of one of its own text messages. They go to the network through
//! the instance's worker; the network tells the other side.

use shared::contract as wire;
use shared::ids::MessageId;
use shared::jid::Jid;

use crate::net::net;
use crate::{Ctx, Error, Result};

/// The longest new text of an edit (characters), as WhatsApp takes it.
pub const EDIT_LIMIT: usize = 4096;

/// A network message id as the account's own messages have them: 1-128 characters.
fn check_network_id(wa_message_id: &str) -> Result<()> {
    if wa_message_id.is_empty() || wa_message_id.chars().count() > 128 {
        return Err(Error::invalid("id must be 1-128 characters"));
    }
    Ok(())
}

/// One of the account's own messages of the local log by its `msg_` id: its chat and
/// network id (`not_found` for one that is not in the log, or not the account's).
pub async fn own(ctx: Ctx<'_>, id: &MessageId) -> Result<(Jid, String)> {
    let (chat, wa) =
        shared::db::log::own_network_id(&ctx.core.db, ctx.instance, id).await?.ok_or(Error::NotFound("message"))?;
    let chat = Jid::parse(&chat).map_err(Error::internal)?;
    Ok((chat, wa))
}

/// Deletes one of the account's own messages for everyone in the chat.
pub async fn revoke(ctx: Ctx<'_>, chat: Jid, wa_message_id: &str) -> Result<()> {
    check_network_id(wa_message_id)?;
    let op = wire::RevokeMessage { jid: chat, wa_message_id: wa_message_id.to_string() };
    net(ctx.core, ctx.instance, op).await
}

/// Replaces the text of one of the account's own text messages: 1-4096 characters, not
/// all white space.
pub async fn edit(ctx: Ctx<'_>, chat: Jid, wa_message_id: &str, text: &str) -> Result<()> {
    let blank = text.chars().all(|c| c.is_whitespace() || crate::text::is_ecma_space(c));
    if blank || text.chars().count() > EDIT_LIMIT {
        return Err(Error::invalid(format!("text must be 1-{EDIT_LIMIT} characters")));
    }
    check_network_id(wa_message_id)?;
    let op = wire::EditMessage { jid: chat, wa_message_id: wa_message_id.to_string(), text: text.to_string() };
    net(ctx.core, ctx.instance, op).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_ids_are_bounded() {
        assert!(check_network_id("3EB0AA").is_ok());
        assert!(check_network_id("").is_err());
        assert!(check_network_id(&"x".repeat(129)).is_err());
        assert!(check_network_id(&"é".repeat(128)).is_ok(), "characters, not bytes");
    }
}
