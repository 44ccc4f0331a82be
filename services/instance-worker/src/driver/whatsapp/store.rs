//! `PgStore`: whatsapp-rust's storage `Backend` (its five traits) over Postgres, one
//! store per instance, on the `wa_store` key-value table (`crate::db::wa_store`).
//!
//! Every write is fenced on the lease epoch the worker holds: after a takeover, the old
//! owner's writes fail with `StoreError::Database(Fenced)` and change nothing, so it can
//! never overwrite the new owner's ratchets or device state. Batch writes (the Signal
//! cache's flush path) are one transaction each: all or nothing, durable on return.
//!
//! Kinds and keys: each of the crate's tables is a `kind`; composite keys join their
//! parts with `\u{1f}` (unit separator, which no JID, address or id contains). Structs are
//! stored as JSON (serde), records and keys as the crate's own bytes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::db::wa_store::{self, Entry, StoreWriteError, Sweep};
use serde::{Deserialize, Serialize};
use shared::ids::InstanceId;
use whatsapp_rust::bytes::Bytes;
use whatsapp_rust::wacore::appstate::hash::HashState;
use whatsapp_rust::wacore::appstate::processor::AppStateMutationMAC;
use whatsapp_rust::wacore::store::error::{Result, StoreError};
use whatsapp_rust::wacore::store::traits::{
    AppStateSyncKey, AppSyncStore, DeviceListRecord, DeviceStore, LidPnMappingEntry, MsgSecretEntry, MsgSecretStore,
    PendingInboundKey, PendingInboundRow, ProtocolStore, SignalStore, TcTokenEntry,
};
use whatsapp_rust::wacore::store::Device;

const SEP: char = '\u{1f}';

mod kind {
    pub const IDENTITY: &str = "identity";
    pub const SESSION: &str = "session";
    pub const PREKEY: &str = "prekey";
    pub const SIGNED_PREKEY: &str = "signed_prekey";
    pub const SENDER_KEY: &str = "sender_key";
    pub const SYNC_KEY: &str = "sync_key";
    pub const VERSION: &str = "version";
    pub const MAC: &str = "mutation_mac";
    pub const SKD: &str = "sender_key_device";
    pub const LID: &str = "lid";
    pub const PN: &str = "pn";
    pub const BASE_KEY: &str = "base_key";
    pub const DEVICES: &str = "devices";
    pub const GROUP: &str = "group";
    pub const TC: &str = "tc_token";
    pub const SENT: &str = "sent_message";
    pub const PENDING: &str = "pending_inbound";
    pub const SECRET: &str = "msg_secret";
    pub const DEVICE: &str = "device";
}

/// The one device row's key.
const SELF: &str = "self";

/// The store of one instance, writing under one lease epoch.
#[derive(Clone)]
pub struct PgStore {
    db: sqlx::PgPool,
    instance: InstanceId,
    epoch: i64,
}

impl PgStore {
    pub fn new(db: sqlx::PgPool, instance: InstanceId, epoch: i64) -> PgStore {
        PgStore { db, instance, epoch }
    }

    /// The lease epoch its writes are fenced on.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    async fn get(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>> {
        wa_store::get(&self.db, &self.instance, kind, key).await.map_err(db)
    }

    async fn list(&self, kind: &str, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        wa_store::list(&self.db, &self.instance, kind, prefix).await.map_err(db)
    }

    async fn put(&self, kind: &str, entries: Vec<Entry>) -> Result<()> {
        wa_store::put_many(&self.db, &self.instance, self.epoch, kind, &entries).await.map_err(write)
    }

    async fn put1(&self, kind: &str, key: String, value: Vec<u8>) -> Result<()> {
        self.put(kind, vec![(key, value, None)]).await
    }

    async fn delete(&self, kind: &str, keys: Vec<String>) -> Result<u64> {
        wa_store::delete(&self.db, &self.instance, self.epoch, kind, &keys).await.map_err(write)
    }

    async fn sweep(&self, kind: &str, what: Sweep<'_>) -> Result<u32> {
        wa_store::sweep(&self.db, &self.instance, self.epoch, kind, what).await.map(|n| n as u32).map_err(write)
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(&self, kind: &str, key: &str) -> Result<Option<T>> {
        self.get(kind, key).await?.map(|v| from_json(&v)).transpose()
    }

    /// The values of these keys that exist, decoded, in one round trip.
    async fn get_json_many<T: for<'de> Deserialize<'de>>(
        &self,
        kind: &str,
        keys: &[String],
    ) -> Result<HashMap<String, T>> {
        let rows = wa_store::get_many(&self.db, &self.instance, kind, keys).await.map_err(db)?;
        rows.into_iter().map(|(k, v)| Ok((k, from_json(&v)?))).collect()
    }
}

fn db(e: sqlx::Error) -> StoreError {
    StoreError::Database(Box::new(e))
}

fn write(e: StoreWriteError) -> StoreError {
    match e {
        StoreWriteError::Fenced(f) => StoreError::Database(Box::new(f)),
        StoreWriteError::Db(e) => db(e),
    }
}

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| StoreError::Serialization(Box::new(e)))
}

fn from_json<T: for<'de> Deserialize<'de>>(v: &[u8]) -> Result<T> {
    serde_json::from_slice(v).map_err(|e| StoreError::Serialization(Box::new(e)))
}

/// Numeric ids as keys that sort like the numbers.
fn id_key(id: u32) -> String {
    format!("{id:010}")
}

fn join(parts: &[&str]) -> String {
    parts.join(&SEP.to_string())
}

/// A prekey row: its uploaded flag, then the record.
fn prekey_value(record: &[u8], uploaded: bool) -> Vec<u8> {
    let mut v = Vec::with_capacity(record.len() + 1);
    v.push(uploaded as u8);
    v.extend_from_slice(record);
    v
}

#[whatsapp_rust::async_trait]
impl SignalStore for PgStore {
    async fn put_identity(&self, address: &str, key: [u8; 32]) -> Result<()> {
        self.put1(kind::IDENTITY, address.to_string(), key.to_vec()).await
    }

    async fn put_identities_batch(&self, identities: &[(Arc<str>, [u8; 32])]) -> Result<()> {
        self.put(kind::IDENTITY, identities.iter().map(|(a, k)| (a.to_string(), k.to_vec(), None)).collect()).await
    }

    async fn load_identity(&self, address: &str) -> Result<Option<[u8; 32]>> {
        match self.get(kind::IDENTITY, address).await? {
            None => Ok(None),
            Some(v) => v
                .try_into()
                .map(Some)
                .map_err(|_| StoreError::Validation("a stored identity key is not 32 bytes".into())),
        }
    }

    async fn delete_identity(&self, address: &str) -> Result<()> {
        self.delete(kind::IDENTITY, vec![address.to_string()]).await.map(drop)
    }

    async fn get_session(&self, address: &str) -> Result<Option<Bytes>> {
        Ok(self.get(kind::SESSION, address).await?.map(Bytes::from))
    }

    async fn put_session(&self, address: &str, session: &[u8]) -> Result<()> {
        self.put1(kind::SESSION, address.to_string(), session.to_vec()).await
    }

    async fn put_sessions_batch(&self, sessions: &[(Arc<str>, Bytes)]) -> Result<()> {
        self.put(kind::SESSION, sessions.iter().map(|(a, s)| (a.to_string(), s.to_vec(), None)).collect()).await
    }

    async fn delete_session(&self, address: &str) -> Result<()> {
        self.delete(kind::SESSION, vec![address.to_string()]).await.map(drop)
    }

    async fn has_signal_state_for_user(&self, user: &str) -> Result<bool> {
        let prefixes = vec![format!("{user}@"), format!("{user}:")];
        wa_store::any_prefix(&self.db, &self.instance, &[kind::SESSION, kind::IDENTITY], &prefixes).await.map_err(db)
    }

    async fn store_prekey(&self, id: u32, record: &[u8], uploaded: bool) -> Result<()> {
        self.put1(kind::PREKEY, id_key(id), prekey_value(record, uploaded)).await
    }

    async fn store_prekeys_batch(&self, keys: &[(u32, Bytes)], uploaded: bool) -> Result<()> {
        self.put(kind::PREKEY, keys.iter().map(|(id, r)| (id_key(*id), prekey_value(r, uploaded), None)).collect())
            .await
    }

    async fn load_prekey(&self, id: u32) -> Result<Option<Bytes>> {
        Ok(self.get(kind::PREKEY, &id_key(id)).await?.map(|v| Bytes::copy_from_slice(v.get(1..).unwrap_or_default())))
    }

    async fn load_prekeys_batch(&self, ids: &[u32]) -> Result<Vec<(u32, Bytes)>> {
        let keys: Vec<String> = ids.iter().map(|i| id_key(*i)).collect();
        let rows = wa_store::get_many(&self.db, &self.instance, kind::PREKEY, &keys).await.map_err(db)?;
        let by_key: HashMap<String, Vec<u8>> = rows.into_iter().collect();
        Ok(ids
            .iter()
            .filter_map(|i| {
                by_key.get(&id_key(*i)).map(|v| (*i, Bytes::copy_from_slice(v.get(1..).unwrap_or_default())))
            })
            .collect())
    }

    /// An update only: a prekey consumed meanwhile does not come back.
    async fn mark_prekeys_uploaded(&self, ids: &[u32]) -> Result<()> {
        let keys: Vec<String> = ids.iter().map(|i| id_key(*i)).collect();
        wa_store::set_first_byte(&self.db, &self.instance, self.epoch, kind::PREKEY, &keys, 1).await.map_err(write)
    }

    async fn remove_prekey(&self, id: u32) -> Result<()> {
        self.delete(kind::PREKEY, vec![id_key(id)]).await.map(drop)
    }

    async fn get_max_prekey_id(&self) -> Result<u32> {
        let max = wa_store::max_key(&self.db, &self.instance, kind::PREKEY).await.map_err(db)?;
        Ok(max.and_then(|k| k.parse().ok()).unwrap_or(0))
    }

    async fn store_signed_prekey(&self, id: u32, record: &[u8]) -> Result<()> {
        self.put1(kind::SIGNED_PREKEY, id_key(id), record.to_vec()).await
    }

    async fn load_signed_prekey(&self, id: u32) -> Result<Option<Vec<u8>>> {
        self.get(kind::SIGNED_PREKEY, &id_key(id)).await
    }

    async fn load_all_signed_prekeys(&self) -> Result<Vec<(u32, Vec<u8>)>> {
        Ok(self
            .list(kind::SIGNED_PREKEY, "")
            .await?
            .into_iter()
            .filter_map(|(k, v)| Some((k.parse().ok()?, v)))
            .collect())
    }

    async fn remove_signed_prekey(&self, id: u32) -> Result<()> {
        self.delete(kind::SIGNED_PREKEY, vec![id_key(id)]).await.map(drop)
    }

    async fn put_sender_key(&self, address: &str, record: &[u8]) -> Result<()> {
        self.put1(kind::SENDER_KEY, address.to_string(), record.to_vec()).await
    }

    async fn put_sender_keys_batch(&self, sender_keys: &[(Arc<str>, Bytes)]) -> Result<()> {
        self.put(kind::SENDER_KEY, sender_keys.iter().map(|(a, r)| (a.to_string(), r.to_vec(), None)).collect()).await
    }

    async fn get_sender_key(&self, address: &str) -> Result<Option<Vec<u8>>> {
        self.get(kind::SENDER_KEY, address).await
    }

    async fn delete_sender_key(&self, address: &str) -> Result<()> {
        self.delete(kind::SENDER_KEY, vec![address.to_string()]).await.map(drop)
    }
}

#[whatsapp_rust::async_trait]
impl AppSyncStore for PgStore {
    async fn get_sync_key(&self, key_id: &[u8]) -> Result<Option<AppStateSyncKey>> {
        self.get_json(kind::SYNC_KEY, &hex::encode(key_id)).await
    }

    async fn set_sync_key(&self, key_id: &[u8], key: AppStateSyncKey) -> Result<()> {
        self.put1(kind::SYNC_KEY, hex::encode(key_id), to_json(&key)?).await
    }

    async fn get_version(&self, name: &str) -> Result<HashState> {
        Ok(self.get_json(kind::VERSION, name).await?.unwrap_or_default())
    }

    async fn set_version(&self, name: &str, state: HashState) -> Result<()> {
        self.put1(kind::VERSION, name.to_string(), to_json(&state)?).await
    }

    async fn put_mutation_macs(&self, name: &str, _version: u64, mutations: &[AppStateMutationMAC]) -> Result<()> {
        let entries =
            mutations.iter().map(|m| (join(&[name, &hex::encode(&m.index_mac)]), m.value_mac.clone(), None)).collect();
        self.put(kind::MAC, entries).await
    }

    async fn get_mutation_mac(&self, name: &str, index_mac: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(kind::MAC, &join(&[name, &hex::encode(index_mac)])).await
    }

    async fn get_mutation_macs(&self, name: &str, index_macs: &[[u8; 32]]) -> Result<HashMap<[u8; 32], Vec<u8>>> {
        let keys: Vec<String> = index_macs.iter().map(|m| join(&[name, &hex::encode(m)])).collect();
        let rows = wa_store::get_many(&self.db, &self.instance, kind::MAC, &keys).await.map_err(db)?;
        let by_key: HashMap<String, Vec<u8>> = rows.into_iter().collect();
        Ok(index_macs.iter().zip(keys).filter_map(|(m, k)| by_key.get(&k).map(|v| (*m, v.clone()))).collect())
    }

    async fn delete_mutation_macs(&self, name: &str, index_macs: &[Vec<u8>]) -> Result<()> {
        self.delete(kind::MAC, index_macs.iter().map(|m| join(&[name, &hex::encode(m)])).collect()).await.map(drop)
    }

    async fn clear_mutation_macs(&self, name: &str) -> Result<()> {
        self.sweep(kind::MAC, Sweep::Prefix(&format!("{name}{SEP}"))).await.map(drop)
    }

    /// The greatest key id in byte order (hex keeps it) whose key decodes.
    async fn get_latest_sync_key_id(&self) -> Result<Option<Vec<u8>>> {
        let rows = self.list(kind::SYNC_KEY, "").await?;
        Ok(rows
            .into_iter()
            .rev()
            .find(|(_, v)| from_json::<AppStateSyncKey>(v).is_ok())
            .and_then(|(k, _)| hex::decode(k).ok()))
    }
}

/// A message secret's row value.
#[derive(Serialize, Deserialize)]
struct Secret {
    secret: Vec<u8>,
    expires_at: i64,
    message_ts: i64,
}

#[whatsapp_rust::async_trait]
impl ProtocolStore for PgStore {
    async fn get_sender_key_devices(&self, group_jid: &str) -> Result<Vec<(String, bool)>> {
        let prefix = format!("{group_jid}{SEP}");
        Ok(self
            .list(kind::SKD, &prefix)
            .await?
            .into_iter()
            .map(|(k, v)| (k[prefix.len()..].to_string(), v.first() == Some(&1)))
            .collect())
    }

    async fn set_sender_key_status(&self, group_jid: &str, entries: &[(&str, bool)]) -> Result<()> {
        self.put(kind::SKD, entries.iter().map(|(d, has)| (join(&[group_jid, d]), vec![*has as u8], None)).collect())
            .await
    }

    async fn clear_sender_key_devices(&self, group_jid: &str) -> Result<()> {
        self.sweep(kind::SKD, Sweep::Prefix(&format!("{group_jid}{SEP}"))).await.map(drop)
    }

    async fn delete_sender_key_device_rows(&self, device_jids: &[&str]) -> Result<()> {
        let keys: Vec<String> = self
            .list(kind::SKD, "")
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| k.split_once(SEP).is_some_and(|(_, d)| device_jids.contains(&d)))
            .collect();
        self.delete(kind::SKD, keys).await.map(drop)
    }

    async fn clear_all_sender_key_devices(&self) -> Result<()> {
        self.sweep(kind::SKD, Sweep::Prefix("")).await.map(drop)
    }

    async fn get_lid_mapping(&self, lid: &str) -> Result<Option<LidPnMappingEntry>> {
        self.get_json(kind::LID, lid).await
    }

    /// The most recent mapping of the phone (an index kept with each mapping).
    async fn get_pn_mapping(&self, phone: &str) -> Result<Option<LidPnMappingEntry>> {
        self.get_json(kind::PN, phone).await
    }

    async fn put_lid_mapping(&self, entry: &LidPnMappingEntry) -> Result<()> {
        self.put_lid_mappings(std::slice::from_ref(entry)).await
    }

    /// Keyed by LID; on conflict the first `created_at` stays. The phone's index points
    /// at its most recently updated mapping.
    async fn put_lid_mappings(&self, entries: &[LidPnMappingEntry]) -> Result<()> {
        let lid_keys: Vec<String> = entries.iter().map(|e| e.lid.clone()).collect();
        let pn_keys: Vec<String> = entries.iter().map(|e| e.phone_number.clone()).collect();
        let old_lids: HashMap<String, LidPnMappingEntry> = self.get_json_many(kind::LID, &lid_keys).await?;
        let mut pns: HashMap<String, LidPnMappingEntry> = self.get_json_many(kind::PN, &pn_keys).await?;
        let mut changed_pns = std::collections::HashSet::new();
        let mut lids = Vec::with_capacity(entries.len());
        for e in entries {
            let mut e = e.clone();
            if let Some(old) = old_lids.get(&e.lid) {
                e.created_at = old.created_at;
            }
            if pns.get(&e.phone_number).is_none_or(|p| e.updated_at >= p.updated_at) {
                changed_pns.insert(e.phone_number.clone());
                pns.insert(e.phone_number.clone(), e.clone());
            }
            lids.push((e.lid.clone(), to_json(&e)?, None));
        }
        let pn_entries =
            changed_pns.into_iter().map(|p| Ok((p.clone(), to_json(&pns[&p])?, None))).collect::<Result<Vec<_>>>()?;
        wa_store::put_kinds(&self.db, &self.instance, self.epoch, &[(kind::LID, lids), (kind::PN, pn_entries)])
            .await
            .map_err(write)
    }

    async fn get_all_lid_mappings(&self) -> Result<Vec<LidPnMappingEntry>> {
        self.list(kind::LID, "").await?.iter().map(|(_, v)| from_json(v)).collect()
    }

    async fn save_base_key(&self, address: &str, message_id: &str, base_key: &[u8]) -> Result<()> {
        self.put1(kind::BASE_KEY, join(&[address, message_id]), base_key.to_vec()).await
    }

    async fn has_same_base_key(&self, address: &str, message_id: &str, current_base_key: &[u8]) -> Result<bool> {
        Ok(self.get(kind::BASE_KEY, &join(&[address, message_id])).await?.is_some_and(|v| v == current_base_key))
    }

    async fn delete_base_key(&self, address: &str, message_id: &str) -> Result<()> {
        self.delete(kind::BASE_KEY, vec![join(&[address, message_id])]).await.map(drop)
    }

    async fn update_device_list(&self, record: DeviceListRecord) -> Result<()> {
        self.update_device_lists(vec![record]).await
    }

    async fn update_device_lists(&self, records: Vec<DeviceListRecord>) -> Result<()> {
        let entries = records.iter().map(|r| Ok((r.user.clone(), to_json(r)?, None))).collect::<Result<Vec<_>>>()?;
        self.put(kind::DEVICES, entries).await
    }

    async fn get_devices(&self, user: &str) -> Result<Option<DeviceListRecord>> {
        self.get_json(kind::DEVICES, user).await
    }

    async fn delete_devices(&self, user: &str) -> Result<()> {
        self.delete(kind::DEVICES, vec![user.to_string()]).await.map(drop)
    }

    async fn get_group_metadata(&self, group_jid: &str) -> Result<Option<Vec<u8>>> {
        self.get(kind::GROUP, group_jid).await
    }

    async fn put_group_metadata(&self, group_jid: &str, blob: &[u8]) -> Result<()> {
        self.put1(kind::GROUP, group_jid.to_string(), blob.to_vec()).await
    }

    async fn delete_group_metadata(&self, group_jid: &str) -> Result<()> {
        self.delete(kind::GROUP, vec![group_jid.to_string()]).await.map(drop)
    }

    async fn get_tc_token(&self, jid: &str) -> Result<Option<TcTokenEntry>> {
        self.get_json(kind::TC, jid).await
    }

    async fn put_tc_token(&self, jid: &str, entry: &TcTokenEntry) -> Result<()> {
        self.put1(kind::TC, jid.to_string(), to_json(entry)?).await
    }

    async fn delete_tc_token(&self, jid: &str) -> Result<()> {
        self.delete(kind::TC, vec![jid.to_string()]).await.map(drop)
    }

    async fn get_all_tc_token_jids(&self) -> Result<Vec<String>> {
        Ok(self.list(kind::TC, "").await?.into_iter().map(|(k, _)| k).collect())
    }

    async fn delete_expired_tc_tokens(&self, token_cutoff: i64, sender_cutoff: i64) -> Result<u32> {
        let mut doomed = Vec::new();
        for (k, v) in self.list(kind::TC, "").await? {
            let e: TcTokenEntry = from_json(&v)?;
            let token_old = e.token.is_empty() || e.token_timestamp < token_cutoff;
            let sender_old = e.sender_timestamp.is_none_or(|s| s < sender_cutoff);
            if token_old && sender_old {
                doomed.push(k);
            }
        }
        self.delete(kind::TC, doomed).await.map(|n| n as u32)
    }

    async fn store_sent_message(&self, chat_jid: &str, message_id: &str, payload: &[u8]) -> Result<()> {
        self.put1(kind::SENT, join(&[chat_jid, message_id]), payload.to_vec()).await
    }

    async fn take_sent_message(&self, chat_jid: &str, message_id: &str) -> Result<Option<Vec<u8>>> {
        wa_store::take(&self.db, &self.instance, self.epoch, kind::SENT, &join(&[chat_jid, message_id]))
            .await
            .map_err(write)
    }

    async fn delete_expired_sent_messages(&self, cutoff_timestamp: i64) -> Result<u32> {
        self.sweep(kind::SENT, Sweep::WrittenBefore(cutoff_timestamp)).await
    }

    async fn store_pending_inbound(&self, chat: &str, sender: &str, id: &str, message: &[u8]) -> Result<()> {
        self.put1(kind::PENDING, join(&[chat, sender, id]), message.to_vec()).await
    }

    async fn get_pending_inbound(&self, chat: &str, sender: &str, id: &str) -> Result<Option<Vec<u8>>> {
        self.get(kind::PENDING, &join(&[chat, sender, id])).await
    }

    async fn delete_pending_inbound(&self, chat: &str, sender: &str, id: &str) -> Result<()> {
        self.delete(kind::PENDING, vec![join(&[chat, sender, id])]).await.map(drop)
    }

    async fn delete_expired_pending_inbound(&self, cutoff_timestamp: i64) -> Result<u32> {
        self.sweep(kind::PENDING, Sweep::WrittenBefore(cutoff_timestamp)).await
    }

    async fn store_pending_inbound_batch(&self, rows: &[PendingInboundRow<'_>]) -> Result<()> {
        self.put(
            kind::PENDING,
            rows.iter().map(|r| (join(&[r.chat, r.sender, r.id]), r.message.to_vec(), None)).collect(),
        )
        .await
    }

    async fn delete_pending_inbound_batch(&self, keys: &[PendingInboundKey<'_>]) -> Result<()> {
        self.delete(kind::PENDING, keys.iter().map(|k| join(&[k.chat, k.sender, k.id])).collect()).await.map(drop)
    }
}

#[whatsapp_rust::async_trait]
impl MsgSecretStore for PgStore {
    /// Upserts; on conflict the expiry merges (0, never, wins; else the later) and the
    /// message time keeps the later.
    async fn put_msg_secrets(&self, entries: Vec<MsgSecretEntry>) -> Result<usize> {
        use whatsapp_rust::wacore::store::traits::{merge_msg_secret_expiry, merge_msg_secret_message_ts};
        let keys: Vec<String> = entries.iter().map(|e| join(&[&e.chat, &e.sender, &e.msg_id])).collect();
        let mut existing: HashMap<String, Secret> = self.get_json_many(kind::SECRET, &keys).await?;
        let mut merged: HashMap<String, Secret> = HashMap::new();
        for (e, k) in entries.iter().zip(keys) {
            let mut s = Secret { secret: e.secret.to_vec(), expires_at: e.expires_at, message_ts: e.message_ts };
            let old = match merged.remove(&k) {
                Some(o) => Some(o),
                None => existing.remove(&k),
            };
            if let Some(o) = old {
                s.expires_at = merge_msg_secret_expiry(o.expires_at, s.expires_at);
                s.message_ts = merge_msg_secret_message_ts(o.message_ts, s.message_ts);
            }
            merged.insert(k, s);
        }
        let rows = merged
            .into_iter()
            .map(|(k, s)| Ok((k, to_json(&s)?, (s.expires_at != 0).then_some(s.expires_at))))
            .collect::<Result<Vec<_>>>()?;
        self.put(kind::SECRET, rows).await?;
        Ok(entries.len())
    }

    async fn get_msg_secret(&self, chat: &str, sender: &str, msg_id: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.get_json::<Secret>(kind::SECRET, &join(&[chat, sender, msg_id])).await?.map(|s| s.secret))
    }

    async fn get_msg_secret_with_ts(&self, chat: &str, sender: &str, msg_id: &str) -> Result<Option<(Vec<u8>, i64)>> {
        Ok(self
            .get_json::<Secret>(kind::SECRET, &join(&[chat, sender, msg_id]))
            .await?
            .map(|s| (s.secret, s.message_ts)))
    }

    async fn delete_expired_msg_secrets(&self, cutoff_timestamp: i64) -> Result<u32> {
        self.sweep(kind::SECRET, Sweep::ExpiredAt(cutoff_timestamp)).await
    }
}

#[whatsapp_rust::async_trait]
impl DeviceStore for PgStore {
    async fn save(&self, device: &Device) -> Result<()> {
        self.put1(kind::DEVICE, SELF.to_string(), to_json(device)?).await
    }

    /// The device, with the runtime-only fields rebuilt (they are not serialized).
    async fn load(&self) -> Result<Option<Device>> {
        let Some(mut d) = self.get_json::<Device>(kind::DEVICE, SELF).await? else { return Ok(None) };
        d.device_props = Arc::new(whatsapp_rust::wacore::store::device::DEVICE_PROPS.clone());
        Ok(Some(d))
    }

    async fn exists(&self) -> Result<bool> {
        Ok(self.get(kind::DEVICE, SELF).await?.is_some())
    }

    /// A new device (fresh keys); one per store, so its id is always 1.
    async fn create(&self) -> Result<i32> {
        self.save(&Device::new()).await?;
        Ok(1)
    }

    async fn resource_report(&self) -> whatsapp_rust::wacore::stats::StorageResourceReport {
        // Everything lives in Postgres: nothing held in this process.
        whatsapp_rust::wacore::stats::StorageResourceReport { memory_bytes: Some(0), ..Default::default() }
    }
}

/// `PgStore` is a whole `Backend`.
#[allow(dead_code)]
fn is_a_backend(s: PgStore) -> Arc<dyn whatsapp_rust::wacore::store::traits::Backend> {
    Arc::new(s)
}
