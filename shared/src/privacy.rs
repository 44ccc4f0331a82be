//! The network's privacy settings: each category and the values it takes. The API checks
//! requests against this table and netsim enforces it; the WhatsApp driver checks again
//! with whatsapp-rust's own rules.

/// (category, the values it takes, its default on a new account).
pub const CATEGORIES: &[(&str, &[&str], &str)] = &[
    ("last", &["all", "contacts", "contact_blacklist", "none"], "all"),
    ("online", &["all", "match_last_seen"], "all"),
    ("profile", &["all", "contacts", "contact_blacklist", "none"], "all"),
    ("status", &["all", "contacts", "contact_blacklist", "none"], "contacts"),
    ("groupadd", &["all", "contacts", "contact_blacklist", "none"], "all"),
    ("readreceipts", &["all", "none"], "all"),
    ("calladd", &["all", "known"], "all"),
    ("messages", &["all", "contacts"], "all"),
];

/// Why a setting is refused; names the rule, never the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PrivacyError {
    #[error("unknown privacy category (last, online, profile, status, groupadd, readreceipts, calladd, messages)")]
    UnknownCategory,
    #[error("this value does not fit the privacy category")]
    BadValue,
}

/// Checks one setting against the table.
pub fn check(category: &str, value: &str) -> Result<(), PrivacyError> {
    let (_, values, _) = CATEGORIES.iter().find(|(c, _, _)| *c == category).ok_or(PrivacyError::UnknownCategory)?;
    if values.contains(&value) {
        Ok(())
    } else {
        Err(PrivacyError::BadValue)
    }
}

/// A new account's settings.
pub fn defaults() -> std::collections::BTreeMap<String, String> {
    CATEGORIES.iter().map(|(c, _, d)| (c.to_string(), d.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_per_category() {
        assert!(check("last", "contacts").is_ok());
        assert!(check("online", "match_last_seen").is_ok());
        assert_eq!(check("online", "contacts"), Err(PrivacyError::BadValue));
        assert_eq!(check("readreceipts", "contacts"), Err(PrivacyError::BadValue));
        assert_eq!(check("favourite_colour", "all"), Err(PrivacyError::UnknownCategory));
        assert_eq!(defaults()["status"], "contacts");
    }
}
