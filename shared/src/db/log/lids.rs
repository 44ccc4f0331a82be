//! Hidden ids (LIDs): the network may name a person by `<id>@lid` instead of their
//! number, and tells the number beside it when it knows it. What the instance learned is
//! kept in `lid_map`; the log keys a 1:1 chat by the number once it is known, so a chat
//! reached by both is one chat: a chat logged under the LID before is merged into the
//! number's when the pair is learned, and a later message naming only the LID is put in
//! the number's chat.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// A message's parties as the network named them: each a JID (the number's once known)
/// and the LID beside it, when the network addressed the party by one.
pub(super) trait Parties {
    fn parties(&mut self) -> [(&mut String, &mut Option<String>); 2];
}

impl Parties for Received {
    fn parties(&mut self) -> [(&mut String, &mut Option<String>); 2] {
        [(&mut self.chat_jid, &mut self.chat_lid), (&mut self.from_jid, &mut self.from_lid)]
    }
}

impl Parties for Changed {
    fn parties(&mut self) -> [(&mut String, &mut Option<String>); 2] {
        [(&mut self.chat_jid, &mut self.chat_lid), (&mut self.from_jid, &mut self.from_lid)]
    }
}

use crate::jid::is_lid_jid as is_lid;

/// Whether a message names a party by a hidden id (only those need settling).
pub(super) fn names_a_lid(m: &Received) -> bool {
    m.chat_lid.is_some() || m.from_lid.is_some() || is_lid(&m.chat_jid) || is_lid(&m.from_jid)
}

/// The numbers' JIDs of the hidden ids among `parties` (instance, JID) that their
/// instances know, by (instance, LID). Asks nothing when none is a LID (the send path's
/// common case).
pub(super) async fn numbers_of<'a>(
    tx: &mut PgConnection,
    parties: impl Iterator<Item = (&'a InstanceId, &'a str)>,
) -> Result<std::collections::HashMap<(InstanceId, String), String>, sqlx::Error> {
    let (instances, lids): (Vec<&str>, Vec<&str>) =
        parties.filter(|(_, j)| is_lid(j)).map(|(i, j)| (i.as_str(), j)).unzip();
    if lids.is_empty() {
        return Ok(Default::default());
    }
    let rows: Vec<(InstanceId, String, String)> = sqlx::query_as(
        "SELECT m.instance_id, m.lid, m.pn FROM lid_map m \
         JOIN UNNEST($1::text[], $2::text[]) AS v(i, l) ON m.instance_id = v.i AND m.lid = v.l",
    )
    .bind(&instances)
    .bind(&lids)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(|(i, l, p)| ((i, l), p)).collect())
}

/// Puts `items`' parties in the log's form, in the writer's fenced transaction: learns the
/// pairs they carry (merging what was logged under a newly learned LID into the number's
/// chat, with a `chat.updated` for both), and names by number every party named only by
/// a LID whose number is known. A party named by a LID keeps it beside its JID.
pub(super) async fn settle<T: Parties>(
    tx: &mut PgConnection,
    instance: &InstanceId,
    items: &mut [T],
) -> Result<(), sqlx::Error> {
    let mut pairs = BTreeMap::new();
    let mut unknown = BTreeSet::new();
    for item in items.iter_mut() {
        for (jid, lid) in item.parties() {
            if is_lid(jid) {
                lid.get_or_insert_with(|| jid.clone());
                unknown.insert(jid.clone());
            } else if let Some(l) = lid.as_deref() {
                if is_lid(l) && crate::jid::server_of(jid) == crate::jid::USER_SERVER {
                    pairs.insert(l.to_string(), jid.clone());
                } else {
                    // Not a pair the log keeps (a group, a malformed id): not carried.
                    *lid = None;
                }
            }
        }
    }
    if pairs.is_empty() && unknown.is_empty() {
        return Ok(());
    }
    if !pairs.is_empty() {
        let (lids, pns): (Vec<&str>, Vec<&str>) = pairs.iter().map(|(l, p)| (l.as_str(), p.as_str())).unzip();
        let learned: Vec<(String, String)> = sqlx::query_as(
            "INSERT INTO lid_map (instance_id, lid, pn) SELECT $1, l, p FROM UNNEST($2::text[], $3::text[]) AS v(l, p) \
             ON CONFLICT (instance_id, lid) DO UPDATE SET pn = EXCLUDED.pn, learned_at = now() \
                 WHERE lid_map.pn <> EXCLUDED.pn \
             RETURNING lid, pn",
        )
        .bind(instance)
        .bind(&lids)
        .bind(&pns)
        .fetch_all(&mut *tx)
        .await?;
        // Merged: every pair newly learned (or changed), and any pair of the batch whose
        // LID still has a chat of its own (one a concurrent write made under the LID
        // before the pair was committed: merged now).
        let split: Vec<String> = sqlx::query_scalar("SELECT jid FROM chats WHERE instance_id = $1 AND jid = ANY($2)")
            .bind(instance)
            .bind(&lids)
            .fetch_all(&mut *tx)
            .await?;
        let mut todo: BTreeMap<&str, &str> = learned.iter().map(|(l, p)| (l.as_str(), p.as_str())).collect();
        for l in &split {
            if let Some(p) = pairs.get(l) {
                todo.entry(l.as_str()).or_insert(p.as_str());
            }
        }
        for (lid, pn) in todo {
            merge(tx, instance, lid, pn).await?;
        }
    }
    let missing: Vec<(&InstanceId, &str)> =
        unknown.iter().filter(|l| !pairs.contains_key(*l)).map(|l| (instance, l.as_str())).collect();
    let found = numbers_of(tx, missing.into_iter()).await?;
    let mut known = pairs;
    known.extend(found.into_iter().map(|((_, l), p)| (l, p)));
    for item in items.iter_mut() {
        for (jid, _) in item.parties() {
            if let Some(pn) = is_lid(jid).then(|| known.get(jid.as_str())).flatten() {
                *jid = pn.clone();
            }
        }
    }
    Ok(())
}

/// The hidden id the instance knows for a number's JID, if any.
pub(super) async fn lid_of(
    tx: &mut PgConnection,
    instance: &InstanceId,
    pn: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT lid FROM lid_map WHERE instance_id = $1 AND pn = $2 ORDER BY learned_at DESC LIMIT 1")
        .bind(instance)
        .bind(pn)
        .fetch_optional(&mut *tx)
        .await
}

/// Moves what the log kept under `lid` to `pn`'s chat: its messages (a message logged
/// under both keeps the number's copy), labels, the attendant's pause and replies, and
/// the chat row (merged into the
/// number's, if that exists: unread counts add up, the later times win), with a
/// `chat.updated` for the LID's chat (`deleted`) and for the number's.
async fn merge(tx: &mut PgConnection, instance: &InstanceId, lid: &str, pn: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM log_messages l WHERE l.instance_id = $1 AND l.chat_jid = $2 AND EXISTS \
             (SELECT 1 FROM log_messages p WHERE p.instance_id = $1 AND p.chat_jid = $3 AND p.wa_message_id = l.wa_message_id)",
    )
    .bind(instance)
    .bind(lid)
    .bind(pn)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE log_messages SET chat_jid = $3 WHERE instance_id = $1 AND chat_jid = $2")
        .bind(instance)
        .bind(lid)
        .bind(pn)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO label_targets (instance_id, label_id, chat_jid, wa_message_id, created_at) \
         SELECT instance_id, label_id, $3, wa_message_id, created_at FROM label_targets \
         WHERE instance_id = $1 AND chat_jid = $2 ON CONFLICT DO NOTHING",
    )
    .bind(instance)
    .bind(lid)
    .bind(pn)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM label_targets WHERE instance_id = $1 AND chat_jid = $2")
        .bind(instance)
        .bind(lid)
        .execute(&mut *tx)
        .await?;
    // A human's hold on the chat (the attendant paused) holds on in the number's, the
    // later end winning; the attendant's replies count in it.
    sqlx::query(
        "INSERT INTO attendant_pauses AS p (instance_id, chat_jid, until, reason) \
         SELECT instance_id, $3, until, reason FROM attendant_pauses WHERE instance_id = $1 AND chat_jid = $2 \
         ON CONFLICT (instance_id, chat_jid) DO UPDATE SET until = GREATEST(p.until, EXCLUDED.until), \
             reason = CASE WHEN EXCLUDED.until > p.until THEN EXCLUDED.reason ELSE p.reason END",
    )
    .bind(instance)
    .bind(lid)
    .bind(pn)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM attendant_pauses WHERE instance_id = $1 AND chat_jid = $2")
        .bind(instance)
        .bind(lid)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE attendant_replies SET chat_jid = $3 WHERE instance_id = $1 AND chat_jid = $2")
        .bind(instance)
        .bind(lid)
        .bind(pn)
        .execute(&mut *tx)
        .await?;
    let old: Option<MergedChat> = sqlx::query_as(&format!(
        "DELETE FROM chats WHERE instance_id = $1 AND jid = $2 RETURNING {CHAT_COLUMNS}, read_at"
    ))
    .bind(instance)
    .bind(lid)
    .fetch_optional(&mut *tx)
    .await?;
    let merged: Option<ChatRow> = match &old {
        Some(o) => {
            let c = &o.chat;
            sqlx::query_as(&format!(
                "INSERT INTO chats AS c (instance_id, jid, name, last_message_at, unread_count, read_at, archived, \
                     pinned, muted_until, lid) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (instance_id, jid) DO UPDATE SET name = COALESCE(c.name, EXCLUDED.name), \
                     last_message_at = GREATEST(c.last_message_at, EXCLUDED.last_message_at), \
                     unread_count = c.unread_count + EXCLUDED.unread_count, \
                     read_at = GREATEST(c.read_at, EXCLUDED.read_at), lid = EXCLUDED.lid, updated_at = now() \
                 RETURNING {CHAT_COLUMNS}"
            ))
            .bind(instance)
            .bind(pn)
            .bind(&c.name)
            .bind(c.last_message_at)
            .bind(c.unread_count)
            .bind(o.read_at)
            .bind(c.archived)
            .bind(c.pinned)
            .bind(c.muted_until)
            .bind(lid)
            .fetch_optional(&mut *tx)
            .await?
        }
        None => {
            sqlx::query_as(&format!(
                "UPDATE chats SET lid = $3, updated_at = now() WHERE instance_id = $1 AND jid = $2 \
                 AND lid IS DISTINCT FROM $3 RETURNING {CHAT_COLUMNS}"
            ))
            .bind(instance)
            .bind(pn)
            .bind(lid)
            .fetch_optional(&mut *tx)
            .await?
        }
    };
    if let Some(o) = &old {
        outbox::insert(&mut *tx, instance, &o.chat.event(true)).await?;
    }
    if let Some(c) = &merged {
        outbox::insert(&mut *tx, instance, &c.event(false)).await?;
    }
    Ok(())
}

/// A chat row removed by a merge, with its read point.
#[derive(sqlx::FromRow)]
struct MergedChat {
    #[sqlx(flatten)]
    chat: ChatRow,
    read_at: Option<DateTime<Utc>>,
}
