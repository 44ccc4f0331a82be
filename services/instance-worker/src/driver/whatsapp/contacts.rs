//! The account's contacts on the WhatsApp network. The network has no "list contacts"
//! call: the phone sends its address book by app-state sync (one contact action per
//! entry) and push names arrive with messages. Each is kept in `wa_store` (kind
//! `pl_contact`, keyed by the phone-number JID), fenced on the lease epoch like the rest
//! of the session, so `contract::Contacts` can answer from Postgres on any worker.

use crate::db::wa_store;
use serde::{Deserialize, Serialize};
use shared::ids::InstanceId;

pub const KIND: &str = "pl_contact";

/// What is known of one contact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contact {
    /// The name in the phone's address book.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The name the contact gave itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_name: Option<String>,
}

/// A change to a contact: `name: Some(None)` removes the address-book name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub name: Option<Option<String>>,
    pub push_name: Option<String>,
}

impl Contact {
    pub fn apply(mut self, c: &Change) -> Contact {
        if let Some(n) = &c.name {
            self.name = n.clone().filter(|s| !s.is_empty());
        }
        if let Some(p) = c.push_name.as_ref().filter(|s| !s.is_empty()) {
            self.push_name = Some(p.clone());
        }
        self
    }

    /// The contact as the worker contract answers it (whether it is a business the
    /// address book does not say); none for a key that is no JID of ours.
    pub fn info(&self, jid: &str) -> Option<shared::contract::ContactInfo> {
        Some(shared::contract::ContactInfo {
            jid: shared::jid::Jid::parse(jid).ok()?,
            name: self.name.clone(),
            push_name: self.push_name.clone(),
            business: None,
        })
    }
}

/// The change an address-book sync action makes, under the key it belongs to (its
/// phone-number JID when the action names one).
pub fn from_action(
    jid: &whatsapp_rust::Jid,
    action: &whatsapp_rust::waproto::whatsapp::sync_action_value::ContactAction,
) -> (String, Change) {
    let pn = action.pn_jid.as_deref().and_then(|p| p.parse::<whatsapp_rust::Jid>().ok());
    let key = super::map::phone_form(jid, pn.as_ref());
    let name = action.full_name.clone().or_else(|| action.first_name.clone());
    (key, Change { name: Some(name), push_name: None })
}

/// Applies changes, fenced on `epoch`: read, merge, write back in one batch.
pub async fn record(
    db: &sqlx::PgPool,
    inst: &InstanceId,
    epoch: i64,
    changes: &[(String, Change)],
) -> Result<(), wa_store::StoreWriteError> {
    if changes.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = changes.iter().map(|(k, _)| k.clone()).collect();
    let stored = wa_store::get_many(db, inst, KIND, &keys).await?;
    let mut merged: std::collections::BTreeMap<String, Contact> =
        stored.into_iter().filter_map(|(k, v)| serde_json::from_slice::<Contact>(&v).ok().map(|c| (k, c))).collect();
    for (key, change) in changes {
        let c = merged.remove(key).unwrap_or_default().apply(change);
        merged.insert(key.clone(), c);
    }
    let entries: Vec<wa_store::Entry> =
        merged.into_iter().map(|(k, c)| (k, serde_json::to_vec(&c).expect("serializes"), None)).collect();
    wa_store::put_many(db, inst, epoch, KIND, &entries).await
}

/// Every known contact, ordered by JID.
pub async fn list(db: &sqlx::PgPool, inst: &InstanceId) -> Result<Vec<shared::contract::ContactInfo>, sqlx::Error> {
    let rows = wa_store::list(db, inst, KIND, "").await?;
    Ok(rows.into_iter().filter_map(|(k, v)| serde_json::from_slice::<Contact>(&v).ok()?.info(&k)).collect())
}

/// The most contacts one status is encrypted to.
pub const STATUS_AUDIENCE_LIMIT: usize = 5_000;

/// Who sees the account's statuses: its address-book contacts (those with a name from
/// the phone's sync, not people who only wrote), phone-number JIDs, at most `limit`.
pub async fn status_audience(db: &sqlx::PgPool, inst: &InstanceId, limit: usize) -> Result<Vec<String>, sqlx::Error> {
    let rows = wa_store::list(db, inst, KIND, "").await?;
    Ok(audience(rows, limit))
}

fn audience(rows: Vec<(String, Vec<u8>)>, limit: usize) -> Vec<String> {
    rows.into_iter()
        .filter(|(k, v)| {
            shared::jid::server_of(k) == shared::jid::USER_SERVER
                && serde_json::from_slice::<Contact>(v).is_ok_and(|c| c.name.is_some())
        })
        .map(|(k, _)| k)
        .take(limit)
        .collect()
}

/// One contact, when known.
pub async fn get(db: &sqlx::PgPool, inst: &InstanceId, jid: &str) -> Result<Option<Contact>, sqlx::Error> {
    Ok(wa_store::get(db, inst, KIND, jid).await?.and_then(|v| serde_json::from_slice(&v).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_merge_names_without_losing_the_other() {
        let c = Contact::default().apply(&Change { name: Some(Some("Ana (work)".into())), push_name: None });
        let c = c.apply(&Change { name: None, push_name: Some("Ana".into()) });
        assert_eq!(c, Contact { name: Some("Ana (work)".into()), push_name: Some("Ana".into()) });
        // An empty push name keeps the old one; a removed address-book entry clears the name.
        let c = c.apply(&Change { name: Some(None), push_name: Some(String::new()) });
        assert_eq!(c, Contact { name: None, push_name: Some("Ana".into()) });
        let info = c.info(shared::jid::Jid::user("5511999990002").as_str()).unwrap();
        assert_eq!(info.push_name.as_deref(), Some("Ana"));
        assert!(c.info("not a jid").is_none());
    }

    #[test]
    fn a_status_goes_to_address_book_contacts_only() {
        use shared::jid::{at, GROUP_SERVER, USER_SERVER};
        let person = |n: &str| at(n, USER_SERVER);
        let row = |k: String, c: Contact| (k, serde_json::to_vec(&c).unwrap());
        let named = Contact { name: Some("Ana".into()), push_name: None };
        let rows = vec![
            row(person("5511999990002"), named.clone()),
            row(person("5511999990003"), Contact { name: None, push_name: Some("Bob".into()) }),
            row(at("120363000000000001", GROUP_SERVER), named.clone()),
            row(person("5511999990004"), named.clone()),
            (person("5511999990005"), b"not json".to_vec()),
        ];
        assert_eq!(audience(rows.clone(), 10), [person("5511999990002"), person("5511999990004")]);
        assert_eq!(audience(rows, 1), [person("5511999990002")]);
    }

    #[test]
    fn address_book_actions_are_keyed_by_phone_number() {
        let lid: whatsapp_rust::Jid = shared::jid::at("123456789012345", shared::jid::LID_SERVER).parse().unwrap();
        let action = whatsapp_rust::waproto::whatsapp::sync_action_value::ContactAction {
            full_name: Some("Bruno".into()),
            pn_jid: Some(shared::jid::Jid::user("5511999990003").as_str().into()),
            ..Default::default()
        };
        let (key, change) = from_action(&lid, &action);
        assert_eq!(key, shared::jid::Jid::user("5511999990003").as_str());
        assert_eq!(change.name, Some(Some("Bruno".into())));
        let first_only = whatsapp_rust::waproto::whatsapp::sync_action_value::ContactAction {
            first_name: Some("Bru".into()),
            ..Default::default()
        };
        let pn: whatsapp_rust::Jid = shared::jid::Jid::user("5511999990003").as_str().parse().unwrap();
        assert_eq!(
            from_action(&pn, &first_only),
            (
                shared::jid::Jid::user("5511999990003").as_str().to_string(),
                Change { name: Some(Some("Bru".into())), push_name: None }
            )
        );
    }
}
