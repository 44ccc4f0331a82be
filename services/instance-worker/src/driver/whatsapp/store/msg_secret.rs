//! `MsgSecretStore` of `PgStore`: Message secrets (for polls, reactions and edits).

use super::*;

/// A message secret's row value.
#[derive(Serialize, Deserialize)]
struct Secret {
    secret: Vec<u8>,
    expires_at: i64,
    message_ts: i64,
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
