//! Schema-only string types: what the description says of strings the code checks by
//! hand (array items take no constraints of their own in utoipa's attributes), so a
//! request valid by the description is one the code accepts.

pub use domain::schemas::{ChannelJid, Cidr, GroupJid, LabelId, PhoneNumber, Recipient, Tag, UserJidOrPhone};
pub use domain::text::{is_ecma_space, trim_ecma};

/// Body of `POST {inst}/channels/{jid}/messages`: that of `POST {inst}/messages` without
/// `to` (the channel is in the path).
pub struct ChannelPostIn;

impl utoipa::PartialSchema for ChannelPostIn {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::Schema;
        use utoipa::openapi::RefOr;
        let mut schema = <domain::message_in::MessageIn as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::Object(o)) = &mut schema {
            o.properties.remove("to");
            o.required.retain(|r| r != "to");
            o.description = Some("The body of `POST {inst}/messages` without `to`.".into());
        }
        schema
    }
}

impl utoipa::ToSchema for ChannelPostIn {}
