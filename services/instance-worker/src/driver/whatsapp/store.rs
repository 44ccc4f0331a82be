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

mod app_sync;
mod device;
mod msg_secret;
mod protocol;
mod signal;

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

/// `PgStore` is a whole `Backend`.
#[allow(dead_code)]
fn is_a_backend(s: PgStore) -> Arc<dyn whatsapp_rust::wacore::store::traits::Backend> {
    Arc::new(s)
}
