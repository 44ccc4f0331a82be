//! Network addresses (JIDs): `<number>@s.whatsapp.net` for a person, `<id>@g.us` for a
//! group, `<id>@lid` for a hidden id, `<id>@newsletter` for a channel (and the
//! broadcast domain of statuses). This module owns the domain suffixes: nobody else
//! writes them.

use std::fmt;

/// A person's domain.
pub const USER_SERVER: &str = "s.whatsapp.net";
/// A group's domain.
pub const GROUP_SERVER: &str = "g.us";
/// A hidden (LID) id's domain.
pub const LID_SERVER: &str = "lid";
/// A channel's domain.
pub const NEWSLETTER_SERVER: &str = "newsletter";
/// The broadcast domain (statuses).
pub const BROADCAST_SERVER: &str = "broadcast";

/// The chat of statuses: a status is sent to it, and statuses received arrive in it. Not a
/// JID a route takes as a chat or contact (`Jid::parse` refuses it); only sends take it.
pub const STATUS_JID: &str = "status@broadcast";

/// What a send takes as its recipient: a JID, a phone number, or `status@broadcast`.
pub const RECIPIENT_PATTERN: &str =
    r"^(\+?[0-9]{7,15}|[0-9][0-9:-]{0,63}@(s\.whatsapp\.net|g\.us|lid|newsletter|broadcast)|status@broadcast)$";

const SERVERS: [&str; 5] = [USER_SERVER, GROUP_SERVER, LID_SERVER, NEWSLETTER_SERVER, BROADCAST_SERVER];

/// What the API takes where it names a chat or a recipient: a JID, or a phone number
/// with country code (7-15 digits, an optional leading `+`). Routes also accept a number
/// written with spaces, dashes, dots or parentheses; the description declares the plain
/// form.
pub const JID_OR_PHONE_PATTERN: &str =
    r"^(\+?[0-9]{7,15}|[0-9][0-9:-]{0,63}@(s\.whatsapp\.net|g\.us|lid|newsletter|broadcast))$";

/// A person: a phone number with country code, or a person's JID (by number or LID).
pub const USER_JID_OR_PHONE_PATTERN: &str = r"^(\+?[0-9]{7,15}|[0-9][0-9:-]{0,63}@(s\.whatsapp\.net|lid))$";

/// A group's JID.
pub const GROUP_JID_PATTERN: &str = r"^[0-9][0-9:-]{0,63}@g\.us$";

/// A channel's JID (`<id>@newsletter`).
pub const CHANNEL_JID_PATTERN: &str = r"^[0-9]{1,64}@newsletter$";

/// A phone number with country code, as the API takes it (plain form; see above).
pub const PHONE_PATTERN: &str = r"^\+?[0-9]{7,15}$";

/// A valid JID, normalized (device suffixes are kept as given).
///
/// Parsed where it comes in (a request, the network); read back from Postgres as it was
/// stored, unchecked (`text`, transparent): a row holds only what was checked when it was
/// written or the network's own ids (`status@broadcast`, hidden ids), and one odd row
/// must never fail the page it is read in.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, sqlx::Type)]
#[serde(try_from = "String", into = "String")]
#[sqlx(transparent)]
pub struct Jid(String);

/// Why a string is not a JID or a phone number; names no input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a JID or a phone number with country code")]
pub struct InvalidJid;

impl Jid {
    /// A JID as given, or a phone number (with its separators dropped) as a person's JID.
    pub fn parse(s: &str) -> Result<Jid, InvalidJid> {
        let s = s.trim();
        match s.split_once('@') {
            Some((user, server)) => {
                let ok_user = user.len() <= 64
                    && user.as_bytes().first().is_some_and(u8::is_ascii_digit)
                    && user.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b':');
                if ok_user && SERVERS.contains(&server) {
                    Ok(Jid(s.to_string()))
                } else {
                    Err(InvalidJid)
                }
            }
            None => Jid::phone(s),
        }
    }

    /// A person's JID from a phone number with country code: 7-15 digits, written with
    /// or without `+`, spaces, dashes, dots and parentheses.
    pub fn phone(number: &str) -> Result<Jid, InvalidJid> {
        let digits = phone_digits(number).ok_or(InvalidJid)?;
        Ok(Jid(format!("{digits}@{USER_SERVER}")))
    }

    /// A person's JID from digits the caller already checked (the network's own numbers).
    pub fn user(digits: &str) -> Jid {
        Jid(format!("{digits}@{USER_SERVER}"))
    }

    /// The part before `@`.
    pub fn user_part(&self) -> &str {
        self.0.split_once('@').map_or(self.0.as_str(), |(u, _)| u)
    }

    /// The part after `@`.
    pub fn server(&self) -> &str {
        server_of(&self.0)
    }

    /// A group's JID.
    pub fn is_group(&self) -> bool {
        self.server() == GROUP_SERVER
    }

    /// A person's JID (by number).
    pub fn is_user(&self) -> bool {
        self.server() == USER_SERVER
    }

    /// A channel's JID.
    pub fn is_channel(&self) -> bool {
        self.server() == NEWSLETTER_SERVER
    }

    /// A person's JID, by number or by hidden id (LID): not a group, channel or broadcast.
    pub fn is_person(&self) -> bool {
        matches!(self.server(), USER_SERVER | LID_SERVER)
    }

    /// The status broadcast (`status@broadcast`), where statuses go.
    pub fn is_status(&self) -> bool {
        self.0 == STATUS_JID
    }

    /// The status broadcast's JID.
    pub fn status() -> Jid {
        Jid(STATUS_JID.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Jid {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Jid {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// The digits of a phone number with country code (7-15 of them), if it is one.
pub fn phone_digits(number: &str) -> Option<String> {
    let number = number.trim();
    let digits: String = number.chars().filter(|c| !matches!(c, '+' | ' ' | '-' | '(' | ')' | '.')).collect();
    ((7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// The server of a JID as a string (`""` when it has none).
pub fn server_of(jid: &str) -> &str {
    jid.split_once('@').map_or("", |(_, server)| server)
}

/// Whether `jid` (a stored JID string) is a group's.
pub fn is_group_jid(jid: &str) -> bool {
    server_of(jid) == GROUP_SERVER
}

/// Whether `jid` (a stored JID string) is a hidden id (`<id>@lid`).
pub fn is_lid_jid(jid: &str) -> bool {
    server_of(jid) == LID_SERVER
}

/// `user@server`, for ids the caller already holds (tests, the network's own ids).
pub fn at(user: &str, server: &str) -> String {
    format!("{user}@{server}")
}

/// The number of a person's JID (or the input itself when it is no JID).
pub fn number_of(jid: &str) -> &str {
    jid.split('@').next().unwrap_or_default()
}

impl fmt::Display for Jid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Jid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // JIDs carry phone numbers: never in logs through a `{:?}`.
        write!(f, "Jid(@{})", self.server())
    }
}

impl TryFrom<String> for Jid {
    type Error = InvalidJid;
    fn try_from(s: String) -> Result<Jid, InvalidJid> {
        Jid::parse(&s)
    }
}

impl From<Jid> for String {
    fn from(j: Jid) -> String {
        j.0
    }
}

impl AsRef<str> for Jid {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Jid {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(JID_OR_PHONE_PATTERN))
            .description(Some("A JID (`<number>@s.whatsapp.net`, `<id>@g.us`, `<id>@lid`, `<id>@newsletter`) or a phone number with country code"))
            .examples([serde_json::json!("5511999990001@s.whatsapp.net"), serde_json::json!("5511999990001")])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Jid {}

/// The schema of a person's address: what contact routes take.
pub struct UserJid;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for UserJid {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(USER_JID_OR_PHONE_PATTERN))
            .description(Some(
                "A person: a phone number with country code, or a JID `<number>@s.whatsapp.net` or `<id>@lid`",
            ))
            .examples([serde_json::json!("5511999990001")])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for UserJid {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jids_and_phone_numbers() {
        assert_eq!(Jid::parse("+55 11 99999-0001").unwrap().as_str(), "5511999990001@s.whatsapp.net");
        assert_eq!(Jid::parse("5511999990001").unwrap().as_str(), "5511999990001@s.whatsapp.net");
        assert_eq!(Jid::parse("120363012345678901@g.us").unwrap().server(), GROUP_SERVER);
        assert!(Jid::parse("120363012345678901@g.us").unwrap().is_group());
        assert_eq!(Jid::parse("5511999990001:3@s.whatsapp.net").unwrap().user_part(), "5511999990001:3");
        for bad in
            ["", "123", "abc@s.whatsapp.net", "5511999990001@evil.example", "@g.us", "-1@g.us", "1234567890123456"]
        {
            assert!(Jid::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format!("{:?}", Jid::parse("5511999990001").unwrap()), "Jid(@s.whatsapp.net)");
    }

    #[test]
    fn the_pattern_accepts_what_parse_accepts_in_plain_form() {
        // The declared pattern is the plain form; every string it matches parses.
        for ok in
            ["5511999990001", "+5511999990001", "5511999990001@s.whatsapp.net", "1-2@g.us", "12@lid", "9@newsletter"]
        {
            assert!(Jid::parse(ok).is_ok(), "{ok}");
        }
    }
}
