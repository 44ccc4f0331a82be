//! `SignalStore` of `PgStore`: Signal's identities, sessions, pre-keys, signed pre-keys and sender keys.

use super::*;

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
