//! Typed, prefixed identifiers. Every id is `<prefix><32 lowercase hex>` built from a
//! UUIDv7, so ids sort by creation time (keyset pagination relies on it).

use std::fmt;

/// Declares a prefixed id type: string form on the wire and in Postgres (`TEXT`).
macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, sqlx::Type)]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id's fixed prefix.
            pub const PREFIX: &'static str = $prefix;

            /// A new, time-ordered id.
            pub fn new() -> Self {
                Self(format!("{}{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            /// Parses an id, checking its prefix and shape.
            pub fn parse(s: &str) -> Result<Self, InvalidId> {
                let hex = s.strip_prefix($prefix).ok_or(InvalidId($prefix))?;
                if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(InvalidId($prefix))
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// When the id was made (the millisecond timestamp its UUIDv7 begins with).
            pub fn made_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
                let ms = i64::from_str_radix(self.0.get($prefix.len()..$prefix.len() + 12)?, 16).ok()?;
                chrono::DateTime::from_timestamp_millis(ms)
            }

            /// The smallest id that could be made at `t`: every id made before `t` sorts
            /// below it (UUIDv7 begins with its millisecond timestamp), so `id < bound`
            /// selects by age through the primary key.
            pub fn bound_at(t: chrono::DateTime<chrono::Utc>) -> String {
                format!("{}{:012x}{}", $prefix, t.timestamp_millis().max(0), "0".repeat(20))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, InvalidId> {
                Self::parse(s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some(concat!("^", $prefix, "[0-9a-f]{32}$")))
                    .examples([serde_json::json!(concat!($prefix, "0195f0c2a8b37d31a0c4e1f2d3b4a5c6"))])
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

/// The error for an id of the wrong shape; it names the expected prefix, never the input.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("expected an id starting with {0}")]
pub struct InvalidId(&'static str);

prefixed_id!(
    /// An instance: one messaging-network account.
    InstanceId, "inst_"
);
prefixed_id!(
    /// A message in an instance's log or queue.
    MessageId, "msg_"
);
prefixed_id!(
    /// A stored media object.
    MediaId, "med_"
);
prefixed_id!(
    /// A webhook endpoint.
    WebhookId, "wh_"
);
prefixed_id!(
    /// One delivery of an event to a webhook.
    DeliveryId, "dlv_"
);
prefixed_id!(
    /// An event (outbox row, webhook body, SSE item).
    EventId, "evt_"
);
prefixed_id!(
    /// A restricted API key of an instance.
    KeyId, "key_"
);
prefixed_id!(
    /// A hosted pairing link of an instance.
    PairingLinkId, "plk_"
);
prefixed_id!(
    /// An account: a provider's customer, holding instances.
    AccountId, "acct_"
);
prefixed_id!(
    /// One of an account's tokens.
    AccountTokenId, "atok_"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_order() {
        let a = InstanceId::new();
        let b = InstanceId::new();
        assert!(a.as_str().starts_with("inst_"));
        assert_eq!(InstanceId::parse(a.as_str()).unwrap(), a);
        assert!(a < b, "ids are time-ordered");
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<InstanceId>(&json).unwrap(), a);
    }

    #[test]
    fn rejects_wrong_prefix_and_shape() {
        let m = MessageId::new();
        assert!(InstanceId::parse(m.as_str()).is_err());
        assert!(InstanceId::parse("inst_XYZ").is_err());
        assert!(InstanceId::parse("inst_0195F0C2A8B37D31A0C4E1F2D3B4A5C6").is_err());
        assert!(serde_json::from_str::<InstanceId>("\"wh_1\"").is_err());
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn ids_made_before_a_time_sort_below_its_bound() {
        let before = EventId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let bound = EventId::bound_at(chrono::Utc::now());
        std::thread::sleep(std::time::Duration::from_millis(2));
        let after = EventId::new();
        assert!(before.as_str() < bound.as_str(), "{before} < {bound}");
        assert!(bound.as_str() < after.as_str(), "{bound} < {after}");
        assert!(EventId::parse(&bound).is_ok(), "a bound has the id's shape");
        let t = before.made_at().unwrap();
        assert!((chrono::Utc::now() - t).num_seconds().abs() < 5, "{t}");
    }
}
