//! A business account's labels (interface.md 4.4). Changes go to the network through
//! the instance's worker first, then are recorded in the local log with their
//! `label.updated` (`db::labels::apply`, which announces a change once even when the
//! network echoes it back). Reads come from the log, so they work while disconnected.
//! A personal account gets `business_account_required`.

use serde::{Deserialize, Serialize};
use shared::contract as wire;
use shared::db::labels::{self, Change, LabelRow};
use shared::ids::MessageId;
use shared::jid::Jid;
use utoipa::ToSchema;

use crate::net::net;
use crate::{business, Ctx, Error, Result};

/// WhatsApp's label colours: an index into its palette of 20.
pub const COLORS: i32 = 20;
pub const NAME_LIMIT: usize = 100;

/// A label.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LabelOut {
    /// The network's id (a small integer as a string on WhatsApp).
    pub id: String,
    pub name: String,
    /// An index into WhatsApp's palette of 20 colours (0-19).
    pub color: i32,
}

impl From<LabelRow> for LabelOut {
    fn from(r: LabelRow) -> Self {
        LabelOut { id: r.label_id, name: r.name, color: r.color }
    }
}

fn check_name(name: &str) -> Result<String> {
    if crate::text::trim_ecma(name).is_empty() || name.chars().count() > NAME_LIMIT {
        return Err(Error::invalid(format!("name must be 1 to {NAME_LIMIT} characters, not only spaces")));
    }
    Ok(name.to_string())
}

fn check_color(color: i32) -> Result<i32> {
    if !(0..COLORS).contains(&color) {
        return Err(Error::invalid(format!("color must be 0 to {}", COLORS - 1)));
    }
    Ok(color)
}

/// A label id as the network uses them (up to 64 letters, digits, `-`, `_`).
fn check_label_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Error::invalid("label_id must be 1 to 64 letters, digits, '-' or '_'"));
    }
    Ok(())
}

/// The business check, then the label, which must exist.
async fn existing(ctx: Ctx<'_>, label_id: &str) -> Result<LabelRow> {
    check_label_id(label_id)?;
    business::require(ctx).await?;
    labels::get(&ctx.core.db, ctx.instance, label_id).await?.ok_or(Error::NotFound("label"))
}

/// Records a change the network accepted (with its event, once).
async fn record(ctx: Ctx<'_>, change: Change) -> Result<()> {
    labels::apply(&ctx.core.db, ctx.instance, None, &change).await?;
    Ok(())
}

/// The account's labels, from the local log.
pub async fn list(ctx: Ctx<'_>) -> Result<Vec<LabelOut>> {
    business::require(ctx).await?;
    let rows = labels::list(&ctx.core.db, ctx.instance).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Creates a label, on the network first.
pub async fn create(ctx: Ctx<'_>, name: &str, color: i32) -> Result<LabelOut> {
    let name = check_name(name)?;
    let color = check_color(color)?;
    business::require(ctx).await?;
    let label_id = labels::next_id(&ctx.core.db, ctx.instance).await?;
    let op = wire::SetLabel { label_id: label_id.clone(), name: name.clone(), color };
    net(ctx.core, ctx.instance, op).await?;
    record(ctx, Change::Edit { label_id: label_id.clone(), name: name.clone(), color }).await?;
    Ok(LabelOut { id: label_id, name, color })
}

/// Renames or recolours a label (absent fields stay), on the network first.
pub async fn edit(ctx: Ctx<'_>, label_id: String, name: Option<&str>, color: Option<i32>) -> Result<LabelOut> {
    let name = name.map(check_name).transpose()?;
    let color = color.map(check_color).transpose()?;
    let now = existing(ctx, &label_id).await?;
    let (name, color) = (name.unwrap_or(now.name), color.unwrap_or(now.color));
    let op = wire::SetLabel { label_id: label_id.clone(), name: name.clone(), color };
    net(ctx.core, ctx.instance, op).await?;
    record(ctx, Change::Edit { label_id: label_id.clone(), name: name.clone(), color }).await?;
    Ok(LabelOut { id: label_id, name, color })
}

/// Deletes a label (it comes off every chat and message), on the network first.
pub async fn delete(ctx: Ctx<'_>, label_id: String) -> Result<()> {
    existing(ctx, &label_id).await?;
    net(ctx.core, ctx.instance, wire::DeleteLabel { label_id: label_id.clone() }).await?;
    record(ctx, Change::Delete { label_id }).await
}

/// Puts a label on a chat or takes it off, on the network first.
pub async fn set_chat(ctx: Ctx<'_>, label_id: String, jid: Jid, labeled: bool) -> Result<()> {
    existing(ctx, &label_id).await?;
    let op = wire::LabelChat { label_id: label_id.clone(), jid: jid.clone(), labeled };
    net(ctx.core, ctx.instance, op).await?;
    record(ctx, Change::Target { label_id, chat_jid: jid.into(), wa_message_id: None, labeled }).await
}

/// Puts a label on a logged message or takes it off, on the network first.
pub async fn set_message(ctx: Ctx<'_>, label_id: String, msg: MessageId, labeled: bool) -> Result<()> {
    existing(ctx, &label_id).await?;
    let (chat_jid, wa_message_id) =
        shared::db::log::network_id(&ctx.core.db, ctx.instance, &msg).await?.ok_or(Error::NotFound("message"))?;
    let jid = Jid::parse(&chat_jid).map_err(Error::internal)?;
    let op = wire::LabelMessage { label_id: label_id.clone(), jid, wa_message_id: wa_message_id.clone(), labeled };
    net(ctx.core, ctx.instance, op).await?;
    record(ctx, Change::Target { label_id, chat_jid, wa_message_id: Some(wa_message_id), labeled }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_colours_and_ids_are_checked() {
        assert!(check_name("Paid").is_ok());
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(101)).is_err());
        assert!(check_name(&"é".repeat(100)).is_ok(), "characters, not bytes");
        assert_eq!(check_color(19).unwrap(), 19);
        assert!(check_color(20).is_err() && check_color(-1).is_err());
        assert!(check_label_id("12").is_ok() && check_label_id("a_b-1").is_ok());
        assert!(
            check_label_id("").is_err() && check_label_id("1 2").is_err() && check_label_id(&"1".repeat(65)).is_err()
        );
    }
}
