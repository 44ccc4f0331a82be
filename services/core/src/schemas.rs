//! Schema-only string types: what the OpenAPI description says of strings the code
//! checks by hand (array items take no constraints of their own in utoipa's attributes),
//! so a request valid by the description is one the code accepts. The doors' request
//! types refer to them with `value_type = ...`.

/// A string schema with a pattern and lengths, for `value_type = ...` in descriptions.
macro_rules! string_schema {
    ($(#[$doc:meta])* $name:ident, pattern = $pattern:expr, min = $min:expr, max = $max:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some($pattern))
                    .min_length(Some($min))
                    .max_length(Some($max))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

string_schema!(
    /// A phone number with country code: 7-15 digits, an optional leading `+`.
    PhoneNumber, pattern = shared::jid::PHONE_PATTERN, min = 7, max = 16
);
string_schema!(
    /// A tag: 1-64 printable characters.
    Tag, pattern = r"^[^\x00-\x1f\x7f-\x9f]+$", min = 1, max = 64
);
string_schema!(
    /// A name of 1-100 characters, not only whitespace, no control character (an
    /// account's, an account token's).
    Name,
    pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$",
    min = 1,
    max = 100
);
string_schema!(
    /// An IP address or a CIDR.
    Cidr, pattern = r"^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$", min = 2, max = 64
);
string_schema!(
    /// A phone number with country code, or a person's JID.
    UserJidOrPhone, pattern = shared::jid::USER_JID_OR_PHONE_PATTERN, min = 7, max = 80
);
string_schema!(
    /// A send's recipient: a phone number with country code, a JID, or
    /// `status@broadcast` (a status, to the account's contacts).
    Recipient, pattern = shared::jid::RECIPIENT_PATTERN, min = 7, max = 80
);
string_schema!(
    /// A channel's JID (`<id>@newsletter`).
    ChannelJid, pattern = shared::jid::CHANNEL_JID_PATTERN, min = 12, max = 75
);
string_schema!(
    /// A label's id: 1-64 letters, digits, `-` or `_` (WhatsApp's are small integers).
    LabelId, pattern = r"^[A-Za-z0-9_-]{1,64}$", min = 1, max = 64
);
string_schema!(
    /// A group's JID (`<id>@g.us`).
    GroupJid, pattern = shared::jid::GROUP_JID_PATTERN, min = 6, max = 69
);
